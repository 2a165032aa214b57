#!/usr/bin/env python3
"""Whether grouping a local folder's syncs would beat the file system's own.

What a `LocalFolder` create with fsync does, by the same system calls: a
staging file is written and synced, linked to its name, unlinked, and its
folder synced. This times that one thread at a time and from 16 threads,
with each thread's own `fsync`s, and with every sync replaced by a
`syncfs` shared by the waiters that arrived while the last one ran (a group
commit of a whole file system, Linux only). Objects go into 64 folders, as
runs' objects go into their own folders. BENCHMARKS.md ("Session 41")
quotes its ratios.

    python3 tools/sync_groups.py [--dir DIR] [--creates N] [--rounds R]

DIR (default: a new folder under the system's temporary folder) must be on
the disk to measure; it is removed at the end.
"""

import argparse
import ctypes
import os
import shutil
import tempfile
import threading
import time

libc = ctypes.CDLL("libc.so.6", use_errno=True)


class GroupSync:
    """One `syncfs` at a time; a caller waits for one that started after it
    arrived, and leads the next if none has."""

    def __init__(self, fd):
        self.fd = fd
        self.cond = threading.Condition()
        self.started = 0
        self.done = 0
        self.running = False

    def sync(self):
        with self.cond:
            need = self.started + 1
            while self.done < need:
                if not self.running:
                    self.started += 1
                    generation = self.started
                    self.running = True
                    break
                self.cond.wait()
            else:
                return
        if libc.syncfs(self.fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs")
        with self.cond:
            self.done = generation
            self.running = False
            self.cond.notify_all()


def create(root, name, group):
    folder = os.path.join(root, f"f{hash(name) % 64}")
    os.makedirs(folder, exist_ok=True)
    staging = os.path.join(folder, f".{name}.tmp")
    fd = os.open(staging, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    try:
        os.write(fd, b"x" * 300)
        if group is None:
            os.fsync(fd)
        else:
            group.sync()
    finally:
        os.close(fd)
    os.link(staging, os.path.join(folder, name))
    os.unlink(staging)
    if group is None:
        dfd = os.open(folder, os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    else:
        group.sync()


def creates_per_second(root, threads, creates, group, tag):
    def work(t):
        for i in range(creates // threads):
            create(root, f"{tag}-{t}-{i}", group)

    start = time.monotonic()
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return creates / (time.monotonic() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="where to create (on the disk to measure)")
    parser.add_argument("--creates", type=int, default=1600)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    root = tempfile.mkdtemp(dir=args.dir, prefix="sync-groups-")
    fd = os.open(root, os.O_DIRECTORY)
    try:
        group = GroupSync(fd)
        print("| round | syncs | threads | creates/s | ÷ one thread with fsync |")
        print("|---|---|---|---|---|")
        for r in range(args.rounds):
            base = None
            for label, g in (("fsync", None), ("grouped syncfs", group)):
                for threads in (1, 16):
                    n = args.creates // 4 if threads == 1 else args.creates
                    rate = creates_per_second(root, threads, n, g, f"{r}-{label[0]}-{threads}")
                    base = base or rate
                    print(f"| {r + 1} | {label} | {threads} | {rate:.0f} | {rate / base:.2f}× |", flush=True)
    finally:
        os.close(fd)
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
