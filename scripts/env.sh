# Sourced by run_all.sh and run_tests.sh: make ./.venv (Python 3.11) with the pinned packages,
# idempotently (re-installs only when requirements.txt changed), and activate it.
set -e
_here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_venv="$_here/.venv"
_py="${PYTHON:-python3.11}"
command -v "$_py" >/dev/null 2>&1 || _py=python3
if [ ! -x "$_venv/bin/python" ]; then
  echo "creating $_venv with $($_py --version 2>&1)" >&2
  "$_py" -m venv "$_venv"
fi
_stamp="$_venv/.requirements.sha256"
_want="$(sha256sum "$_here/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$_stamp" 2>/dev/null)" != "$_want" ]; then
  echo "installing pinned packages into $_venv (once)" >&2
  # torch alone first, so that nothing else can pull a different (e.g. several-GB CUDA) build
  # (the grep drops pip's notices about this machine's local index folders, not errors)
  "$_venv/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  "$_venv/bin/python" -m pip install -q --disable-pip-version-check -r "$_here/requirements.txt" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "$_want" > "$_stamp"
fi
# shellcheck disable=SC1091
. "$_venv/bin/activate"
export PYTHONPATH="$_here${PYTHONPATH:+:$PYTHONPATH}"
set +e
