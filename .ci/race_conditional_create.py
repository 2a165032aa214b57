"""How often do racing conditional creates of one key both succeed?

Sends 8 `PUT`s with `If-None-Match: *` to each of TRIALS keys at once (a
barrier releases them together) and counts the keys that more than one PUT
created. An S3 API whose conditional create is atomic answers 0. See
RELIABILITY.md ("moto's conditional create is not atomic").

    python race_conditional_create.py PORT [TRIALS]   # bucket memo-ci on 127.0.0.1:PORT
"""

import sys
import threading
import urllib.error
import urllib.request

WRITERS = 8


def main():
    port = sys.argv[1]
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    wins = {}
    lock = threading.Lock()

    def put(key, writer, barrier):
        barrier.wait()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/memo-ci/race/{key}",
            data=f"writer-{writer}".encode(),
            method="PUT",
            headers={"If-None-Match": "*"},
        )
        try:
            urllib.request.urlopen(request, timeout=30).read()
        except urllib.error.HTTPError:
            return
        with lock:
            wins.setdefault(key, []).append(writer)

    for trial in range(trials):
        barrier = threading.Barrier(WRITERS)
        threads = [
            threading.Thread(target=put, args=(f"k{trial}", w, barrier))
            for w in range(WRITERS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    doubled = sum(1 for writers in wins.values() if len(writers) > 1)
    print(f"{doubled} of {trials} keys had more than one successful conditional create")


if __name__ == "__main__":
    main()
