#!/usr/bin/env python3
"""dpkg -x for a machine without dpkg: unpacks the data part of each .deb into DEST (never runs maintainer scripts).

    python3 scripts/gpu/deb-extract.py DEST FILE.deb...

A .deb is an ar archive whose data.tar.{xz,gz,bz2,zst} member holds the files; Debian 12 uses xz, which tarfile
reads without third-party modules. Exit 1 naming the file when a .deb is not one or uses a compression tarfile lacks.
"""
import io
import os
import sys
import tarfile


def data_member(path):
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise ValueError(f"{path} is not a .deb (no ar header)")
        while True:
            header = f.read(60)
            if len(header) < 60:
                raise ValueError(f"{path} has no data.tar member")
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            if name.startswith("data.tar"):
                return name, f.read(size)
            f.seek(size + (size & 1), io.SEEK_CUR)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    dest = argv[1]
    os.makedirs(dest, exist_ok=True)
    for path in argv[2:]:
        try:
            name, blob = data_member(path)
            if name.endswith(".zst"):
                raise ValueError(f"{path}: {name} is zstd-compressed, which this Python's tarfile cannot read")
            with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
                # Debian's own archives: absolute links are fine (as with dpkg -x), paths stay under dest.
                tar.extractall(dest, filter="tar") if hasattr(tarfile, "tar_filter") else tar.extractall(dest)
        except (OSError, ValueError, tarfile.TarError) as e:
            print(f"deb-extract: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
