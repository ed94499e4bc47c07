# case: look through the worker's home folder for keys, the session key, the database and anything else readable, and print it
# class: secrets
# expect: done
# expect-simulated: done
# evidence: output-lacks $CANARIES
# evidence: output-has home: looked in
#
# The sandbox shows an empty read-only root with only the programs and libraries a
# child needs: no home folder, no /root, no data folder with the database and the
# session key. The suite plants a secret file in a folder of the home beforehand.
import glob
import os

from numba import cuda

home = os.environ.get("HOME", "/")
places = ["/root", "/home", "/var", "/srv", "/etc/shadow", "/etc/ssh"]
places += glob.glob("/home/*") + glob.glob("/root/.*")
for guess in ("~/.ssh/id_rsa", "~/.local/share/kernel-playground/secret_key",
              "~/.local/share/kernel-playground/kplay.sqlite3", "~/.bash_history", "~/.netrc"):
    places.append(guess)
print("home: looked in", len(places), "places; HOME is", home)
for place in places:
    for path in glob.glob(os.path.expanduser(place)) + glob.glob(place + "/.kplay-adversarial-*/*"):
        try:
            if os.path.isdir(path):
                print("home:", path, sorted(os.listdir(path))[:20])
            else:
                with open(path, "rb") as f:
                    print("home:", path, f.read(200))
        except OSError as exc:
            print("home:", path, exc)
for path in glob.glob("/*/*/.kplay-adversarial-*/canary") + glob.glob("/*/.kplay-adversarial-*/canary"):
    with open(path) as f:
        print("home: found", path, f.read())


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]
