"""The serve fault run of issue #27, whole: what was recorded against what was begun.

8 ``zeus run`` clients x 20 recurrences of one job (the CIFAR-100 trace job, MAB + JIT) through one
``zeus serve`` over a PostgreSQL server started here, on loopback; while they run, the service is
SIGKILLed and restarted 7 times and the database is stopped twice for 12 s, longer than the
service's 10 s lease. Then every client's exit status, and the job's account read back from the
database: recurrences begun, recorded (a try that reached the target), abandoned, open, and tries
stored twice. Exit status 0 when every client exited 0 and every begun recurrence was recorded
exactly once.

    python benchmarks/serve_faults.py [--clients 8] [--recurrences 20] [--kills 7] [--outages 2]
                                      [--outage-s 12] [--lease-s 10]

Needs the PostgreSQL server programs (initdb, pg_ctl) on PATH. A few minutes on 2 cores.
``tests/zeus_plugins_serve/test_serve_faults.py`` runs a bounded version of it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "_support"))


def main() -> int:
    from pg_server import PgServer
    from serve_faults import fault_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--recurrences", type=int, default=20)
    ap.add_argument("--kills", type=int, default=7, help="SIGKILL + restarts of the service")
    ap.add_argument("--outages", type=int, default=2, help="stops of the database")
    ap.add_argument("--outage-s", type=float, default=12.0, help="how long each stop lasts")
    ap.add_argument("--lease-s", type=float, default=10.0, help="the service's lease (zeus serve --lease-s)")
    args = ap.parse_args()
    with PgServer.start_new() as pg, tempfile.TemporaryDirectory(prefix="zeus-serve-faults-") as work:
        report = fault_run(
            pg,
            Path(work),
            clients=args.clients,
            recurrences=args.recurrences,
            kills=args.kills,
            outages=args.outages,
            outage_s=args.outage_s,
            lease_s=args.lease_s,
            timeout_s=3600,
        )
    for line in report.lines():
        print(line)
    for code, err in zip(report.exits, report.errors):
        if code != 0:
            print(f"--- a client exited {code}:\n{err.strip()[-1500:]}")
    print("whole: every client exit 0, every begun recurrence recorded exactly once" if report.whole else "NOT whole: see above")
    return 0 if report.whole else 1


if __name__ == "__main__":
    sys.exit(main())
