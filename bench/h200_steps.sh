# Sourced by the one-call device scripts (bench/h200_*.sh): $OUT made, and `step NAME SECONDS CMD...`, which runs
# CMD under its own timeout with its output in $OUT/NAME.log and a line "NAME rc=… Ns" in $OUT/steps.txt.
OUT=${OUT:-/tmp/ks-out}
mkdir -p "$OUT"
step() {  # step NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout -k 10 "$secs" "$@" >"$OUT/$name.log" 2>&1
  echo "$name rc=$? $(( SECONDS - t0 ))s" >>"$OUT/steps.txt"
}
