"""The floor of one batch job per submission on this host: what no batch
system, however it is built, can beat here.

    python3 scripts/lib/job_floor.py PORT JOBS SCRIPT

Listens on 127.0.0.1:PORT (0: a free port the system picks), and says
`listening PORT` on its standard output once it does. Each connection
is one submission: it is
closed at once, and SCRIPT (an executable batch script, run through its
`#!` line as Slurm and clemu run theirs) is started with posix_spawn.
Exits once JOBS submissions came and every script has ended. Nothing
else: no queue, no scheduler, no supervisor process, no accounting and
nothing written to disk, so that a submission costs only what the host
charges for the processes and the connection.
"""

import os
import socket
import sys


def main():
    port, jobs, script = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1024)
    # Ready: the caller waits for this line before it submits.
    print("listening", s.getsockname()[1], flush=True)
    started = live = 0
    while started < jobs or live:
        if started < jobs:
            c, _ = s.accept()
            c.close()
            os.posix_spawn(script, [script], os.environ)
            started += 1
            live += 1
        # Reap what has ended, without waiting while submissions still come.
        while live:
            pid, _ = os.waitpid(-1, 0 if started >= jobs else os.WNOHANG)
            if pid == 0:
                break
            live -= 1


if __name__ == "__main__":
    main()
