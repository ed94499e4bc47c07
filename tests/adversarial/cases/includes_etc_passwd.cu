// case: #include the host's /etc/passwd (and /proc/1/environ), so that the compiler's error messages show their lines
// class: files
// expect: compile_error
// expect-simulated: compile_error
// evidence: output-lacks root:x:0:0
// evidence: output-lacks $CANARIES
//
// NVRTC reads an absolute #include like any other file, and quotes the lines it cannot
// parse in its errors, which the reader sees. It runs in the learner's box, where
// /etc/passwd is the sandbox's own (one user, learner) and /proc is the box's own pid
// namespace: the errors can quote nothing of the host.
#include "/etc/passwd"
#include "/proc/1/environ"

extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}
