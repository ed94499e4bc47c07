"""The system-call filter of the sandbox: a deny-list of calls no kernel job needs.

Built with libseccomp (through `pyseccomp`) as a classic BPF program and handed to
bubblewrap (`--seccomp FD`), which installs it right before it starts the child, so
every process of the sandbox (the evaluator, compilers, anything a learner starts) runs
under it and cannot drop it. A denied call fails with EPERM, so learner code sees an
ordinary error instead of dying; calls of another architecture (32-bit `int 0x80`, x32)
kill the process, as libseccomp does by default.

`socket()` stays allowed: Python and CUDA use AF_UNIX socket pairs, and the child talks
to its parent over one. The network namespace is what keeps a socket from reaching
anything.
"""

from __future__ import annotations

import errno
import os
from functools import cache

# Calls a kernel job never needs: debugging other processes, changing mounts or
# namespaces, the kernel keyring, loading BPF or kernel modules, performance counters,
# rebooting, swapping, process accounting, page-fault handling in user space, file
# handles that bypass path permissions, the new mount API and io_uring (a long record of
# kernel bugs), time setting and the kernel log.
DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "kcmp",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "syslog",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "quotactl",
    "lookup_dcookie",
    "vhangup",
    "iopl",
    "ioperm",
    "uselib",
    "nfsservctl",
    "fanotify_init",
)

# clone() flags that create namespaces; clone3() hides its flags in memory a filter cannot
# read, so it answers ENOSYS and the C library falls back to clone(), which is checked.
CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)

# personality() flags that weaken the address space of programs started afterwards:
# ADDR_NO_RANDOMIZE (no ASLR), MMAP_PAGE_ZERO, READ_IMPLIES_EXEC.
PERSONALITY_FLAGS = (0x0040000, 0x0100000, 0x0400000)
PERSONALITY_QUERY = 0xFFFFFFFF  # asks for the current personality and changes nothing


class SeccompUnavailable(RuntimeError):
    pass


@cache
def filter_program() -> bytes:
    """The BPF program of the deny-list for this machine's architecture."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # the module, or libseccomp under it, is missing
        raise SeccompUnavailable(f"pyseccomp/libseccomp cannot be loaded: {exc}") from None
    deny = sc.ERRNO(errno.EPERM)
    flt = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED:
        try:
            flt.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):
            continue  # a call this architecture lacks (or one libseccomp does not know)
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NAMESPACE_FLAGS:
        flt.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # A rule may test an argument once, so "flag set and not the query" is written as one
    # rule per other bit: the flag set and that bit clear. Only the query has every bit set.
    for flag in PERSONALITY_FLAGS:
        for bit in range(32):
            if 1 << bit != flag:
                flt.add_rule(deny, "personality", sc.Arg(0, sc.MASKED_EQ, flag | 1 << bit, flag))
    fd = os.memfd_create("kplay-seccomp-build", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            flt.export_bpf(out)
        size = os.lseek(fd, 0, os.SEEK_END)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


def program_fd() -> int:
    """A fresh fd holding the program from its first byte, for one bubblewrap to read.

    Each sandbox needs its own: bubblewrap reads to the end, and a shared file offset
    would leave the next one nothing.
    """
    program = filter_program()
    fd = os.memfd_create("kplay-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
