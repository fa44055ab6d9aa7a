#!/usr/bin/env bash
# A single-node SLURM cluster on this machine (Debian's slurm-wlm + munge; root, no systemd), for the SLURM
# launcher test (tests/test_cluster.py). Idempotent: installs only what is missing, writes slurm.conf only when
# there is none, starts only the daemons that are not running. It never stops anything: the PIDs of the daemons
# it started are appended to the file $1 (none by default: they keep running) for .ci/run to stop at its end.
# Partition `cpu` holds this host with all its cores. Accounting is off (no slurmdbd): `sacct` does not answer.
set -euo pipefail
pids=${1:-/dev/null}

if [ "$(id -u)" != 0 ]; then echo "slurm-up: needs root; SLURM tests will be skipped" >&2; exit 1; fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || { echo "slurm-up: no apt-get to install slurm-wlm" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

# munge: the key, its folders owned by munge, the daemon as user munge
[ -f /etc/munge/munge.key ] || mungekey -c
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown -R munge: /etc/munge /run/munge /var/lib/munge /var/log/munge
if ! munge -n </dev/null >/dev/null 2>&1; then
    su munge -s /bin/sh -c /usr/sbin/munged
    pgrep -u munge -n -x munged >>"$pids"
fi

host=$(hostname -s)
if [ ! -f /etc/slurm/slurm.conf ]; then
    mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
    mkdir -p /etc/slurm
    cat >/etc/slurm/slurm.conf <<EOF
# written by pe-pipeline's .ci/slurm-up.sh: one node, one partition, no accounting
ClusterName=pe-ci
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
fi
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm

if ! pgrep -x slurmctld >/dev/null; then
    slurmctld
    sleep 1
    pgrep -n -x slurmctld >>"$pids"
fi
if ! pgrep -x slurmd >/dev/null; then
    slurmd
    sleep 1
    pgrep -n -x slurmd >>"$pids"
fi
for _ in $(seq 30); do    # the node registers within seconds
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
        sinfo
        exit 0
    fi
    sleep 1
done
echo "slurm-up: the node did not come up; see /var/log/slurm/" >&2
sinfo >&2 || true
exit 1
