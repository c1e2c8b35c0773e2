//! A private system bus with Debian's polkitd, in a mount namespace of its own (a holder made by
//! `unshare -m`): a tmpfs on `/run/dbus` holds the bus at the standard path (the setuid
//! `polkit-agent-helper-1` clears its environment and reaches polkitd only there), and the
//! shipped action file is bind-mounted into `/usr/share/polkit-1/actions`, so the host machine's
//! files are left untouched. `tests/integration/polkit.rs` uses it with a person's password;
//! `allowing_root` adds an administrator's polkit rule so that the host tests, whose hosts run
//! mcpguard as root, get their out-of-band approvals through the real polkitd without a
//! password prompt (the approval still comes only from polkitd).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A system-bus configuration for the private bus; `@EXTRA@` is replaced with more `<listen>`s.
pub const BUS_CONF: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=/run/dbus/system_bus_socket</listen>
  @EXTRA@
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <includedir>/usr/share/dbus-1/system.d</includedir>
</busconfig>
"#;

/// The holder: mounts, the bus, polkitd; it ends them when the test process (`$2`) is gone.
const HOLDER: &str = r#"set -e
mount -t tmpfs -o mode=0755 tmpfs /run/dbus
mount --bind "$1/actions" /usr/share/polkit-1/actions
[ -d "$1/rules" ] && mount --bind "$1/rules" /etc/polkit-1/rules.d
dbus-daemon --config-file="$1/bus.conf" --nofork --nopidfile &
D=$!
echo $D > "$1/dbus.pid"
for i in $(seq 200); do [ -S /run/dbus/system_bus_socket ] && break; sleep 0.05; done
/usr/lib/polkit-1/polkitd --no-debug > "$1/polkitd.log" 2>&1 &
P=$!
echo $P > "$1/polkitd.pid"
trap 'kill $D $P 2>/dev/null' EXIT TERM
while kill -0 "$2" 2>/dev/null; do sleep 1; done
"#;

/// A running rig.
pub struct Rig {
    pub dir: tempfile::TempDir,
    pub holder: Child,
}

impl Rig {
    /// Starts the rig; `rule` is a polkit rules file installed in `/etc/polkit-1/rules.d` inside
    /// the namespace, `extra_listen` another address of the bus. Needs root and polkitd.
    pub fn start(rule: Option<&str>, extra_listen: bool) -> Rig {
        assert!(
            Path::new("/usr/lib/polkit-1/polkitd").exists()
                && Command::new("pkttyagent").arg("--version").output().is_ok(),
            "polkitd and pkttyagent are missing: scripts/install-peers.sh installs Debian's polkitd"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let extra = if extra_listen {
            format!("<listen>unix:path={}/bus</listen>", dir.path().display())
        } else {
            String::new()
        };
        std::fs::write(
            dir.path().join("bus.conf"),
            BUS_CONF.replace("@EXTRA@", &extra),
        )
        .unwrap();
        let actions = dir.path().join("actions");
        std::fs::create_dir(&actions).unwrap();
        for entry in std::fs::read_dir("/usr/share/polkit-1/actions").unwrap() {
            let p = entry.unwrap().path();
            std::fs::copy(&p, actions.join(p.file_name().unwrap())).unwrap();
        }
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("packaging/polkit/io.github.mcpguard.policy");
        std::fs::copy(&shipped, actions.join("io.github.mcpguard.policy")).unwrap();
        if let Some(rule) = rule {
            let rules = dir.path().join("rules");
            std::fs::create_dir(&rules).unwrap();
            std::fs::write(rules.join("50-mcpguard-test.rules"), rule).unwrap();
            std::fs::set_permissions(&rules, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::create_dir_all("/run/dbus").unwrap();
        let holder = Command::new("unshare")
            .args([
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                HOLDER,
                "holder",
            ])
            .arg(dir.path())
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let rig = Rig { dir, holder };
        // Ready when polkitd answers about the action from the shipped file.
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let out = rig
                .inside(&[
                    "pkaction",
                    "--action-id",
                    "io.github.mcpguard.approve-write",
                ])
                .output()
                .unwrap();
            if out.status.success() {
                break;
            }
            assert!(
                Instant::now() < until,
                "polkitd did not come up: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(rig.dir.path().join("polkitd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        rig
    }

    /// `argv` in the rig's mount namespace, as root.
    pub fn inside(&self, argv: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.holder.id().to_string(), "-m", "--"])
            .args(argv)
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                "unix:path=/run/dbus/system_bus_socket",
            );
        cmd
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for f in ["polkitd.pid", "dbus.pid"] {
            if let Some(pid) = std::fs::read_to_string(self.dir.path().join(f))
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                // SAFETY: kill has no memory preconditions; the pid is the rig's daemon.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// The address of a system bus whose polkitd authorizes mcpguard's action for root without a
/// password (an administrator's rule), shared by every test of this process and ended with it;
/// `None` when the tests do not run as root (a host's out-of-band approval then cannot pass).
pub fn allowing_root() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    static ADDRESS: OnceLock<String> = OnceLock::new();
    let address = ADDRESS.get_or_init(|| {
        let rig = Rig::start(
            Some(
                "polkit.addRule(function(action, subject) {\n  if (action.id == \"io.github.mcpguard.approve-write\" && subject.user == \"root\") {\n    return polkit.Result.YES;\n  }\n});\n",
            ),
            true,
        );
        let address = format!("unix:path={}/bus", rig.dir.path().display());
        // Kept for the life of the test process (never dropped): its holder ends the daemons
        // once this process is gone.
        std::mem::forget(rig);
        address
    });
    Some(address.clone())
}
