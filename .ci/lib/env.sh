# Shared by .ci/lock, .ci/drift and .ci/check-lock: build a venv as a new user does, and write or read a lock.
# Sourced, not run.

# The torch build the README installs (the CPU build where pip finds one; the CUDA build elsewhere). Its local version
# (+cpu) is left out of the lock, so the lock admits either build of the same release.
TORCH_PIN="torch==2.13.0"

# fresh_install VENV EXTRAS [pip options...]: a new venv with torch first, then the project with EXTRAS, pip's cache off.
fresh_install() {
  local venv=$1 extras=$2
  shift 2
  python3 -m venv "$venv"
  PIP_NO_CACHE_DIR=1 "$venv/bin/pip" install -q "$@" "$TORCH_PIN"
  PIP_NO_CACHE_DIR=1 "$venv/bin/pip" install -q "$@" -e ".[$extras]"
}

# frozen VENV: "name==version" lines of what VENV holds, the project itself and torch's local version left out.
# setuptools is in (torch needs it at run time); pip is not (the venv's own, from the Python that made it).
frozen() {
  "$1/bin/pip" freeze --all --exclude-editable | grep -v -e '^-e ' -e '^pip==' |
    sed -E 's/^(torch==[^+]+)\+.*/\1/' | LC_ALL=C sort -f
}

# write_lock VENV FILE COMMAND: FILE becomes what VENV holds, under a header naming the command that wrote it.
write_lock() {
  local venv=$1 file=$2 command=$3
  {
    echo "# The lock: every package version the tests passed on. Written by \`$command\`; do not edit by hand."
    echo "# Installed with: pip install -c $file ... (the README says where). Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), $(date -u +%Y-%m-%d)."
    frozen "$venv"
  } >"$file"
}
