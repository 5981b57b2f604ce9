#!/bin/sh
# Slurm's Prolog and Epilog for zeus slurm prolog/epilog: each job charged the energy of its GPUs.
# slurm.conf, on every node:
#   Prolog=/etc/slurm/zeus-slurm.sh
#   Epilog=/etc/slurm/zeus-slurm.sh
# Which hook it is comes from Slurm's SLURM_SCRIPT_CONTEXT (prolog_slurmd, epilog_slurmd), or $1.
# Slurm runs it as SlurmdUser with only its own SLURM_* variables (no PATH): the settings come from
# ${ZEUS_SLURM_DEFAULTS:-/etc/default/zeus-slurm}, a shell file that may set
#   ZEUS                the command (default: zeus; e.g. "/opt/zeus/bin/python -m zeus_core.cli")
#   ZEUSD_SOCK_PATH     the node daemon's Unix socket (default /run/zeus/daemon.sock), or
#   ZEUSD_HOST_PORT     its TCP address, and ZEUSD_TOKEN a token with the gpu-read scope
#   ZEUS_SLURM_RECORD   the record file the epilog appends to (default /var/log/zeus/slurm-energy.jsonl)
#   ZEUS_SLURM_STATE    the folder of the prolog's readings (default /run/zeus-slurm)
# It exits 0 whatever happens: a failing Prolog or Epilog would drain the node. Problems go to slurmd's log.
case "${1:-${SLURM_SCRIPT_CONTEXT:-}}" in
    prolog | prolog_slurmd) hook=prolog ;;
    epilog | epilog_slurmd) hook=epilog ;;
    *)
        echo "zeus-slurm.sh: run it as Slurm's Prolog or Epilog (SLURM_SCRIPT_CONTEXT='${SLURM_SCRIPT_CONTEXT:-}'), or pass prolog|epilog" >&2
        exit 0
        ;;
esac
defaults="${ZEUS_SLURM_DEFAULTS:-/etc/default/zeus-slurm}"
if [ -r "$defaults" ]; then . "$defaults"; fi
PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"
if [ -z "${ZEUSD_SOCK_PATH:-}" ] && [ -z "${ZEUSD_HOST_PORT:-}" ]; then ZEUSD_SOCK_PATH=/run/zeus/daemon.sock; fi
: "${ZEUS_SLURM_RECORD:=/var/log/zeus/slurm-energy.jsonl}"
export PATH ZEUSD_SOCK_PATH ZEUSD_HOST_PORT ZEUSD_TOKEN ZEUS_SLURM_RECORD ZEUS_SLURM_STATE
# shellcheck disable=SC2086  # ZEUS may be a command with arguments
${ZEUS:-zeus} slurm "$hook" || echo "zeus-slurm.sh: zeus slurm $hook exited $? for job ${SLURM_JOB_ID:-?}" >&2
exit 0
