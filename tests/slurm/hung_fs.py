"""A file system that hangs: a FUSE mount whose root lists empty and every lookup below it blocks until the mount is
stopped, as a path on a dead NFS server or a stuck parallel file system does. A process that touches a path below
the root waits in the kernel (SIGKILL still ends it, as it ends a process on a hung NFS mount with `intr`).

    with HungFileSystem(path):   # mounted (allow_other: every user sees it), then unmounted and its server stopped
                                 # (also when the test process is killed: the server watches it)
        ...

Debian's python3-fusepy (and libfuse2, which it loads) serve it; /dev/fuse and root are needed to mount.

No polling either way: the server says "mounted" on its stdout from FUSE's init callback (the kernel has answered the
mount), and it learns that the test process is gone when its stdin, a pipe only that process holds open, reaches
end of file.
"""

import errno
import os
import select
import stat
import subprocess
import sys
import threading

MOUNTED = "mounted"


def _serve(mountpoint):
    import fusepy as fuse  # Debian's name for fusepy's module

    # If the test process is killed outright (SIGKILL from ctest's time-out), nothing unmounts: this watchdog does, so
    # no hung mount is left under /tmp for the next `find` or `du` to block on.
    def watch_owner():
        sys.stdin.read()  # end of file: the owner closed the pipe or died
        subprocess.run(["umount", "-l", mountpoint], check=False, capture_output=True)
        os._exit(0)

    threading.Thread(target=watch_owner, daemon=True).start()

    class Hung(fuse.Operations):
        def init(self, path):
            print(MOUNTED, flush=True)

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
        # close_fds (the default) keeps the stdin pipe's write end out of every later child (slurmd and the rest): its
        # end of file then means this process is gone.
        self.server = subprocess.Popen([sys.executable, os.path.abspath(__file__), self.mountpoint],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
        ready, _, _ = select.select([self.server.stdout], [], [], 20)
        line = self.server.stdout.readline().strip() if ready else ""
        if line != MOUNTED or not _mounted(self.mountpoint):
            self.__exit__(None, None, None)
            rest = self.server.stdout.read()
            raise RuntimeError(f"the hung file system did not mount at {self.mountpoint} within 20 s: {line}{rest}")
        return self

    def __exit__(self, exc_type, exc, tb):
        # Lazy unmount first: processes still blocked in it get an error instead of waiting on a dead server.
        subprocess.run(["umount", "-l", self.mountpoint], check=False, capture_output=True)
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()
        return False


if __name__ == "__main__":
    _serve(sys.argv[1])
