#!/usr/bin/env bash
# Installs a built mcpguard .deb into a scratch root (dpkg -x: no root rights, nothing touches the
# machine) and checks that what the package promises is there and works: the program runs, the
# man pages render, the completions and the shipped policies are in place, and the installed
# policies load.
#
#   packaging/deb/smoke.sh PACKAGE.deb
set -euo pipefail
deb="$1"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

dpkg-deb --info "$deb" >/dev/null
dpkg-deb --field "$deb" Package Version Architecture Depends
dpkg -x "$deb" "$scratch"

fail() { echo "package check failed: $*" >&2; exit 1; }
bin="$scratch/usr/bin/mcpguard"
[ -x "$bin" ] || fail "usr/bin/mcpguard is missing or not executable"
version=$("$bin" --version) || fail "mcpguard --version did not run"
echo "installed: $version"
[ "$version" = "mcpguard $(dpkg-deb --field "$deb" Version | sed 's/-[^-]*$//')" ] || fail "version $version does not match the package"

for f in usr/share/man/man1/mcpguard.1.gz \
         usr/share/man/man5/mcpguard-policy.5.gz \
         usr/share/man/man5/mcpguard-manifest.5.gz \
         usr/share/bash-completion/completions/mcpguard \
         usr/share/zsh/vendor-completions/_mcpguard \
         usr/share/fish/vendor_completions.d/mcpguard.fish \
         usr/share/polkit-1/actions/io.github.mcpguard.policy \
         usr/share/doc/mcpguard/copyright \
         usr/share/doc/mcpguard/changelog.Debian.gz; do
  [ -s "$scratch/$f" ] || fail "$f is missing"
done
if command -v man >/dev/null; then
  for page in "$scratch"/usr/share/man/man*/*.gz; do
    MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q . || fail "$page does not render"
  done
fi
policies=("$scratch"/usr/share/mcpguard/policies/*.toml)
[ -e "${policies[0]}" ] || fail "no policies under usr/share/mcpguard/policies"
for p in "${policies[@]}"; do
  "$bin" policy check "$p" >/dev/null 2>&1 || fail "the installed $(basename "$p") does not load"
done
[ -e "$scratch/usr/share/mcpguard/policies/default.toml" ] || fail "default.toml is missing"
[ -d "$scratch/etc/mcpguard" ] || fail "etc/mcpguard, the managed policy floor's directory, is missing"
echo "package ok: ${#policies[@]} policies, 3 man pages, 3 completions"
