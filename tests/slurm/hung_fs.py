"""A file system that hangs: a FUSE mount whose root lists empty and every lookup below it blocks until the mount is
stopped, as a path on a dead NFS server or a stuck parallel file system does. A process that touches a path below
the root waits in the kernel (SIGKILL still ends it, as it ends a process on a hung NFS mount with `intr`).

    with HungFileSystem(path):   # mounted (allow_other: every user sees it), then unmounted and its server stopped
                                 # (also when the test process is killed: the server watches it)
        ...

Debian's python3-fusepy (and libfuse2, which it loads) serve it; /dev/fuse and root are needed to mount.
"""

import errno
import os
import stat
import subprocess
import sys
import threading
import time


def _serve(mountpoint, owner_pid):
    import fusepy as fuse  # Debian's name for fusepy's module

    # If the test process is killed outright (SIGKILL from ctest's time-out), nothing unmounts: this watchdog does, so
    # no hung mount is left under /tmp for the next `find` or `du` to block on.
    def watch_owner():
        while os.getppid() == owner_pid:  # reparented once the owner is gone (a pid may be reused; a parent is not)
            time.sleep(1)
        subprocess.run(["umount", "-l", mountpoint], check=False, capture_output=True)
        os._exit(0)

    threading.Thread(target=watch_owner, daemon=True).start()

    class Hung(fuse.Operations):
        def getattr(self, path, fh=None):
            if path == "/":
                return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
            threading.Event().wait()  # never set: the caller blocks until the server is stopped
            raise fuse.FuseOSError(errno.EIO)

        def readdir(self, path, fh):
            return [".", ".."]

    fuse.FUSE(Hung(), mountpoint, foreground=True, allow_other=True, nothreads=False)


def _mounted(mountpoint):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == mountpoint for line in f)


class HungFileSystem:
    def __init__(self, mountpoint):
        self.mountpoint = os.path.abspath(mountpoint)
        self.server = None

    def __enter__(self):
        os.makedirs(self.mountpoint, exist_ok=True)
        self.server = subprocess.Popen([sys.executable, os.path.abspath(__file__), self.mountpoint, str(os.getpid())],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 20
        while not _mounted(self.mountpoint):
            if self.server.poll() is not None or time.monotonic() > deadline:
                output = self.server.stdout.read() if self.server.poll() is not None else ""
                self.__exit__(None, None, None)
                raise RuntimeError(f"the hung file system did not mount at {self.mountpoint}: {output}")
            time.sleep(0.05)
        return self

    def __exit__(self, exc_type, exc, tb):
        # Lazy unmount first: processes still blocked in it get an error instead of waiting on a dead server.
        subprocess.run(["umount", "-l", self.mountpoint], check=False, capture_output=True)
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()
        return False


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
