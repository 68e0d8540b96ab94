# The scripts' own TENAX_* settings, checked before any work: each is declared in runtime/src/core/env_registry.cpp
# (a setting given to a script reaches every tenax program the script starts, which checks it again), and a value
# those programs would refuse is refused here at once, naming the setting, rather than by every test later.
# Sourced by scripts/build.sh, run-tests.sh and run-sanitizers.sh.

# tenax_setting_count NAME DEFAULT: prints $NAME (or DEFAULT when unset), which must be a whole number from 1 to MAX.
tenax_setting_count() {
  local name=$1 default=$2 max=$3 value
  value=${!name-$default}
  if ! [[ $value =~ ^[1-9][0-9]{0,9}$ ]] || ((value > max)); then
    echo "$(basename "$0"): $name='$value' is not valid: expected a whole number from 1 to $max" >&2
    exit 64
  fi
  echo "$value"
}

# tenax_setting_choice NAME DEFAULT CHOICE...: prints $NAME (or DEFAULT when unset), which must be one of CHOICE.
tenax_setting_choice() {
  local name=$1 default=$2 value choice
  shift 2
  value=${!name-$default}
  for choice in "$@"; do
    if [ "$value" = "$choice" ]; then
      echo "$value"
      return
    fi
  done
  echo "$(basename "$0"): $name='$value' is not valid: expected one of $*" >&2
  exit 64
}
