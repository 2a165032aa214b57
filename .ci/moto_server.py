"""moto_server with S3 conditional creates made atomic, as S3's are.

moto 5.2.5 checks `If-None-Match: *` and stores the object in two steps
(`S3Response.put_object`: `get_object`, then `put_object`), with nothing
held between them, while its server answers requests on many threads. Two
creates of one key that arrive together can then both succeed, the second
overwriting the first: 2 of 300 keys raced by 8 writers at once on this
machine. memo's guarantees rest on a conditional create that only one writer
wins (every memo entry, run log entry and checkpoint is created that way),
and S3 gives that; so this wrapper holds one lock around every object PUT,
which makes moto's check and store one step. See RELIABILITY.md.

Run it as moto_server: `python moto_server.py -H 127.0.0.1 -p PORT`.
"""

import functools
import sys
import threading

from moto.s3.responses import S3Response
from moto.server import main

_put_lock = threading.Lock()
_put_object = S3Response.put_object


@functools.wraps(_put_object)
def _atomic_put_object(self):
    with _put_lock:
        return _put_object(self)


S3Response.put_object = _atomic_put_object

if __name__ == "__main__":
    sys.exit(main())
