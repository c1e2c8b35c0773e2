#!/usr/bin/env bash
# Builds the Debian package from a staged tree with dpkg-deb (no cargo-deb, no debhelper), so it
# runs on any Debian machine with the Rust toolchain.
#
#   packaging/deb/build.sh [--profile release|dev] [--out DIR]
#
# --profile picks the cargo profile whose binary goes into the package (release by default; CI
# passes `dev` to reuse the binary the tests already built instead of spending minutes on a
# release build). The build is `--locked`, and the package is reproducible: every file's time is
# SOURCE_DATE_EPOCH (the last commit's time unless set), owners are root, man pages are gzipped
# without names or times, and the binary is stripped. Prints the path of the .deb.
set -euo pipefail
cd "$(dirname "$0")/../.."

profile=release
out=target/deb
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--profile release|dev] [--out DIR]" >&2; exit 2 ;;
  esac
done
# A dev package only serves CI's install check, so it is compressed fast (its unoptimized binary
# is large and xz would take most of the step's time); a release package gets xz.
case "$profile" in
  dev|debug) profile=dev; bindir=target/debug; compress=(-Zgzip -z1) ;;
  release) bindir=target/release; compress=(-Zxz) ;;
  *) echo "unknown profile $profile (release or dev)" >&2; exit 2 ;;
esac

cargo build --quiet --locked --profile "$profile" --bin mcpguard

# The version comes from the Debian changelog, whose upstream part must match Cargo.toml: a
# release that forgets the changelog fails here instead of shipping a wrong version.
deb_version=$(sed -n '1s/^mcpguard (\([^)]*\)).*/\1/p' packaging/deb/changelog)
cargo_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
if [ "${deb_version%-*}" != "$cargo_version" ]; then
  echo "packaging/deb/changelog is at ${deb_version}, Cargo.toml at ${cargo_version}: add a changelog entry" >&2
  exit 1
fi
arch=$(dpkg --print-architecture)
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
umask 022
root="$stage/mcpguard_${deb_version}_${arch}"
install -D -m 0755 "$bindir/mcpguard" "$root/usr/bin/mcpguard"
strip --strip-unneeded --remove-section=.comment "$root/usr/bin/mcpguard"
for page in man/*.1 man/*.5; do
  section="${page##*.}"
  install -d "$root/usr/share/man/man$section"
  gzip -9nc "$page" > "$root/usr/share/man/man$section/$(basename "$page").gz"
done
# The polkit action of the trusted approval path (crates/mcpguard-approvals/src/approvals/polkit.rs).
install -D -m 0644 packaging/polkit/io.github.mcpguard.policy "$root/usr/share/polkit-1/actions/io.github.mcpguard.policy"
install -D -m 0644 completions/mcpguard.bash "$root/usr/share/bash-completion/completions/mcpguard"
install -D -m 0644 completions/_mcpguard "$root/usr/share/zsh/vendor-completions/_mcpguard"
install -D -m 0644 completions/mcpguard.fish "$root/usr/share/fish/vendor_completions.d/mcpguard.fish"
install -d "$root/usr/share/mcpguard/policies"
install -m 0644 policies/*.toml "$root/usr/share/mcpguard/policies/"
# The managed floor's directory, empty: administrators put policy.toml there (docs/teams.md).
install -d -m 0755 "$root/etc/mcpguard"
install -D -m 0644 packaging/deb/copyright "$root/usr/share/doc/mcpguard/copyright"
gzip -9nc packaging/deb/changelog > "$root/usr/share/doc/mcpguard/changelog.Debian.gz"
install -m 0644 README.md "$root/usr/share/doc/mcpguard/README.md"
for doc in docs/*.md; do
  install -m 0644 "$doc" "$root/usr/share/doc/mcpguard/"
done

# Depends: the shared libraries the binary needs, as packages, with the newest glibc symbol
# version it uses as libc6's lower bound (what dpkg-shlibdeps would compute for this binary).
depends=()
glibc=$(objdump -T "$root/usr/bin/mcpguard" | sed -n 's/.*GLIBC_\([0-9.]*\).*/\1/p' | sort -uV | tail -1)
for lib in $(readelf -d "$root/usr/bin/mcpguard" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
  case "$lib" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) dep="libc6${glibc:+ (>= $glibc)}" ;;
    libgcc_s.so.*) dep="libgcc-s1" ;;
    *) dep=$(dpkg -S "*/$lib" 2>/dev/null | head -1 | cut -d: -f1)
       [ -n "$dep" ] || { echo "cannot find the package that ships $lib" >&2; exit 1; } ;;
  esac
  case " ${depends[*]-} " in *" $dep "*) ;; *) depends+=("$dep") ;; esac
done
depends_line=$(IFS=,; echo "${depends[*]}" | sed 's/,/, /g')

install -d "$root/DEBIAN"
installed_size=$(du -sk --apparent-size "$root/usr" | cut -f1)
sed -e "s/@VERSION@/$deb_version/" -e "s/@ARCH@/$arch/" \
    -e "s/@INSTALLED_SIZE@/$installed_size/" -e "s/@DEPENDS@/$depends_line/" \
    packaging/deb/control.in > "$root/DEBIAN/control"
(cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum > DEBIAN/md5sums)
find "$root" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb="$out/mcpguard_${deb_version}_${arch}.deb"
dpkg-deb --root-owner-group "${compress[@]}" --build "$root" "$deb" >/dev/null
echo "$deb"
