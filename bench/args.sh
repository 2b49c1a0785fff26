# Sourced by bench/run.sh and bench/cluster.sh (with `here` set to bench/): reads the
# script's arguments into `smoke` (1 with --smoke), `out` (--out DIR; default
# bench/results/, or bench/.work/results/ for smoke runs) and `args` (everything else,
# --smoke included, for the Python side).
out=""
args=()
smoke=""
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) smoke=1; args+=("$1") ;;
        --out) out="$2"; shift ;;
        --out=*) out="${1#--out=}" ;;
        *) args+=("$1") ;;
    esac
    shift
done
if [ -z "$out" ]; then
    if [ -n "$smoke" ]; then out="$here/.work/results"; else out="$here/results"; fi
fi
