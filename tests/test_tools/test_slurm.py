"""tools/slurm_train.sh and tools/slurm_test.sh under a real Slurm.

munged, slurmctld and slurmd are started here on this machine, one node
with its own CPUs and memory and no cgroups (proctrack/linuxproc), from
files in a temporary folder, and shut down at the end. The demo trains
with 2 CPU tasks (gloo), is cancelled with ``scancel`` after its first
checkpoint, resumes with ``--resume`` to the last epoch, and
slurm_test.sh prints the metric of the final checkpoint. Needs root (the
daemons) and Debian's ``slurm-wlm`` and ``munge`` (``make test-slurm``
installs them as root).
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..helpers import (
    DEMO,
    ROOT,
    evaluate_in_process,
    free_port,
    tool_env,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

DAEMONS = ('munged', 'slurmctld', 'slurmd', 'srun', 'squeue', 'scancel')
PARTITION = 'debug'
EPOCHS = 4

SLURM_CONF = """\
ClusterName=t2t
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.socket
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} \
State=UNKNOWN
PartitionName={partition} Nodes={host} Default=YES MaxTime=INFINITE \
State=UP
"""


def skip_reason() -> str:
    """Why Slurm cannot run here, or '' if it can."""
    if sys.platform != 'linux' or os.geteuid() != 0:
        return 'Slurm test: needs root on Linux to start munged and slurmd'
    missing = [name for name in DAEMONS if not shutil.which(name)]
    if missing:
        return (
            f'Slurm test: {", ".join(missing)} not installed (Debian: '
            'apt-get install slurm-wlm munge, or make test-slurm as root)'
        )
    return ''


def memory_mb() -> int:
    """Nine tenths of the machine's memory (slurmd drains a node that
    declares more than it has)."""
    with open('/proc/meminfo') as meminfo:
        total_kb = int(meminfo.readline().split()[1])
    return total_kb * 9 // 10 // 1024


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f'{what} after {timeout:g} s')
        time.sleep(0.5)


class Cluster:
    """A one-node Slurm cluster on this machine, in ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = socket.gethostname().split('.')[0]
        self.conf = root / 'slurm.conf'
        self.env = dict(tool_env(), SLURM_CONF=str(self.conf))

    def command(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            args,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def start(self) -> None:
        for folder in ('state', 'spool'):
            (self.root / folder).mkdir()
        key = self.root / 'munge.key'
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(
            SLURM_CONF.format(
                host=self.host,
                root=self.root,
                ctld_port=free_port(),
                slurmd_port=free_port(),
                cpus=os.cpu_count(),
                memory=memory_mb(),
                partition=PARTITION,
            )
        )
        munge = (
            'munged',
            '--force',
            f'--key-file={key}',
            f'--socket={self.root}/munge.socket',
            f'--pid-file={self.root}/munged.pid',
            f'--log-file={self.root}/munged.log',
            f'--seed-file={self.root}/munged.seed',
        )
        for daemon in (
            munge,
            ('slurmctld', '-f', str(self.conf), '-c'),
            ('slurmd', '-f', str(self.conf), '-N', self.host),
        ):
            done = self.command(*daemon)
            assert done.returncode == 0, self.logs(done.stderr)
        wait_for(
            lambda: (
                self.command('sinfo', '-h', '-o', '%T').stdout.strip()
                == 'idle'
            ),
            60,
            'the node did not become idle',
        )

    def stop(self) -> None:
        self.command('scontrol', 'shutdown')
        pid_file = self.root / 'munged.pid'
        if pid_file.is_file():
            subprocess.run(
                ['munged', '--stop', f'--socket={self.root}/munge.socket'],
                capture_output=True,
                timeout=60,
            )

    def logs(self, extra: str = '') -> str:
        """The daemons' logs, for an assertion message."""
        parts = [extra]
        for name in ('munged.log', 'slurmctld.log', 'slurmd.log'):
            path = self.root / name
            if path.is_file():
                parts.append(f'--- {name}\n' + path.read_text()[-1500:])
        return '\n'.join(parts)

    def job_ids(self, name: str) -> list:
        done = self.command('squeue', '-h', '-n', name, '-o', '%i')
        return done.stdout.split()

    def job_id(self, name: str, process: subprocess.Popen) -> str:
        """The id of the job ``process`` submitted, once Slurm lists it."""
        wait_for(
            lambda: self.job_ids(name) or process.poll() is not None,
            60,
            f'no job {name}',
        )
        (job,) = self.job_ids(name)
        return job


def report(job: str, log: str) -> None:
    """The lines of a job's log that say what ran (pytest -rP shows
    them)."""
    lines = re.findall(
        r'.*(?:Distributed launcher|GPU number|resumed epoch|'
        r'Epoch\((?:val|test)\)).*',
        log,
    )
    print(f'job {job}:', *(line.strip() for line in lines), sep='\n  ')


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = Cluster(tmp_path_factory.mktemp('slurm'))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def slurm_script(
    cluster: Cluster, script: str, *args: str
) -> subprocess.Popen:
    """Start ``tools/<script>`` with 2 tasks of one CPU each, no GPUs."""
    env = dict(
        cluster.env,
        GPUS='2',
        GPUS_PER_NODE='2',
        CPUS_PER_TASK='1',
        GRES='',
        PYTHON=sys.executable,
    )
    return subprocess.Popen(
        ['bash', f'tools/{script}', PARTITION, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def train_args(work_dir: Path, *extra: str) -> tuple:
    return (
        'digits',
        DEMO,
        str(work_dir),
        '--verbose',  # the resume's INFO lines
        '--cfg-options',
        f'train_cfg.max_epochs={EPOCHS}',
        f'train_cfg.val_interval={EPOCHS}',
        'default_hooks.checkpoint.interval=1',
        'default_hooks.logger.interval=4',
        *extra,
    )


def test_train_cancel_resume_and_test(cluster, tmp_path):
    work_dir = tmp_path / 'work'
    first = slurm_script(cluster, 'slurm_train.sh', *train_args(work_dir))
    wait_for(
        lambda: (
            (work_dir / 'epoch_1.pth').is_file() or first.poll() is not None
        ),
        600,
        'no first checkpoint',
    )
    (job,) = cluster.job_ids('digits')
    assert cluster.command('scancel', job).returncode == 0
    log = first.communicate(timeout=120)[0]
    report(job, log)
    assert first.returncode != 0, log[-3000:]
    assert not (work_dir / f'epoch_{EPOCHS}.pth').is_file(), log[-3000:]
    # 1438 images over 2 ranks of 64: 12 iterations per epoch.
    assert 'Epoch(train) [1][12/12]' in log, log[-3000:]
    wait_for(lambda: not cluster.job_ids('digits'), 60, 'the job did not end')
    kept = sorted(work_dir.glob('epoch_*.pth'))
    last = int(re.search(r'epoch_(\d+)', kept[-1].name).group(1))
    assert last < EPOCHS

    second = slurm_script(
        cluster, 'slurm_train.sh', *train_args(work_dir, '--resume')
    )
    job = cluster.job_id('digits', second)
    log = second.communicate(timeout=900)[0]
    report(job, log)
    assert second.returncode == 0, log[-3000:] + cluster.logs()
    assert f'resumed epoch: {last}, iter: {12 * last}' in log, log[-3000:]
    assert f'Epoch(train) [{last + 1}][12/12]' in log
    assert f'Epoch(train) [{last}][12/12]' not in log
    assert f'Epoch(val) [{EPOCHS}][2/2]' in log
    checkpoint = work_dir / f'epoch_{EPOCHS}.pth'
    assert checkpoint.is_file()

    test = slurm_script(
        cluster,
        'slurm_test.sh',
        'digits-test',
        DEMO,
        str(checkpoint),
        '--work-dir',
        str(tmp_path / 'test'),
    )
    job = cluster.job_id('digits-test', test)
    log = test.communicate(timeout=600)[0]
    report(job, log)
    assert test.returncode == 0, log[-3000:]
    # the tool's metric lines (the test loop's log line is in its log file)
    metric = re.search(r'^accuracy/top1: ([\d.]+)$', log, re.MULTILINE)
    assert metric, log[-3000:]
    top1, _ = evaluate_in_process(str(checkpoint))
    assert float(metric.group(1)) == pytest.approx(top1, abs=1e-2)
