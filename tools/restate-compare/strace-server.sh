#!/bin/sh
# restate-server under `strace -f -c`: its sync and write calls counted, the
# summary written to $STRACE_OUT when the server ends. For `--server`; see
# README.md, "Counting syncs".
here=$(dirname "$0")
exec strace -f -c -o "${STRACE_OUT:-restate-server.strace}" \
    -e trace=fsync,fdatasync,sync_file_range,write,pwrite64,writev,pwritev2 \
    "$here/server/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server" "$@"
