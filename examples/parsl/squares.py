"""A Parsl workflow on an emulated cluster, through Parsl's own SlurmProvider.

Parsl submits a block (a batch job that starts its worker pool) with
`sbatch`, follows it with `sacct`, and cancels it with `scancel`: the
commands `clemu-slurm up` puts first on PATH. Twenty tasks run in the
block's workers, real processes on the cluster's nodes. Prints one line
per task: the input, its square, and the Slurm job that ran it.
"""
import os
import sys

import parsl
from parsl import python_app
from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.launchers import SingleNodeLauncher
from parsl.providers import SlurmProvider


@python_app
def square(x):
    import os

    return x * x, os.environ["SLURM_JOB_ID"], os.environ["SLURMD_NODENAME"]


def main():
    run_dir = sys.argv[1] if len(sys.argv) > 1 else "runinfo"
    config = Config(
        run_dir=run_dir,
        executors=[
            HighThroughputExecutor(
                label="clemu",
                address="127.0.0.1",
                max_workers_per_node=2,
                provider=SlurmProvider(
                    partition="batch",
                    nodes_per_block=1,
                    init_blocks=1,
                    min_blocks=0,
                    max_blocks=1,
                    walltime="00:10:00",
                    exclusive=False,
                    launcher=SingleNodeLauncher(),
                ),
            )
        ],
    )
    with parsl.load(config):
        results = [square(i) for i in range(20)]
        for i, r in enumerate(results):
            value, job, node = r.result()
            print(f"{i} {value} {job} {node}", flush=True)


if __name__ == "__main__":
    main()
