/* The attacker's probes for mcpguard's sandbox (tests/integration/escape.rs).
 *
 * One program, one subcommand per attempted escape: `escape NAME ARGS...`. Every probe prints
 * `probe NAME start` first (so a test can tell "the sandbox stopped it" from "it never ran"),
 * then exactly one result line:
 *   ESCAPED: what it did          exit 0
 *   STOPPED: what failed (errno)  exit 1
 *   ERROR: a set-up problem       exit 2 (neither proves nor disproves anything)
 * Wherever the effect can be observed from outside, the test checks the effect itself (the bytes
 * a listener received, the file's mode, the victim's nice value) and uses this line only to
 * explain what happened.
 *
 * Every probe is harmless to the machine: changes are made to the test's own files and
 * processes, or are no-ops (the current hostname set again, the current interface flags set
 * again, accounting pointed at a file that does not exist), and anything created is removed.
 *
 * Built by the test with `gcc -static` (falls back to a dynamic build), plus a dynamic copy for
 * the `ld.so FILE` probe. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/userfaultfd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/shm.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/klog.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

static const char *probe_name = "?";

static int escaped(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int escaped(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("ESCAPED: %s: ", probe_name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    return 0;
}

/* `what` failed with the current errno. */
static int stopped(const char *what) {
    int e = errno;
    printf("STOPPED: %s: %s failed: errno %d (%s)\n", probe_name, what, e, strerror(e));
    fflush(stdout);
    return 1;
}

static int error(const char *what) {
    int e = errno;
    printf("ERROR: %s: %s: errno %d (%s)\n", probe_name, what, e, strerror(e));
    fflush(stdout);
    return 2;
}

static const char *tmpdir(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

/* ---- 1. TCP Fast Open ------------------------------------------------------------------ */

static int make_addr(const char *host, const char *port, struct sockaddr_storage *ss,
                     socklen_t *len) {
    memset(ss, 0, sizeof *ss);
    if (strchr(host, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(atoi(port));
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) return -1;
        *len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(atoi(port));
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) return -1;
        *len = sizeof *a;
    }
    return 0;
}

/* mode: "sendto", "sendmsg" or "connect" (TCP_FASTOPEN_CONNECT + connect + write). */
static int tfo(const char *mode, const char *host, const char *port, const char *token) {
    struct sockaddr_storage ss;
    socklen_t len;
    if (make_addr(host, port, &ss, &len)) return error("bad address");
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0) return stopped("socket");
    size_t n = strlen(token);
    ssize_t sent;
    if (!strcmp(mode, "sendto")) {
        sent = sendto(fd, token, n, MSG_FASTOPEN, (struct sockaddr *)&ss, len);
        if (sent < 0) return stopped("sendto(MSG_FASTOPEN)");
    } else if (!strcmp(mode, "sendmsg")) {
        struct iovec iov = {(void *)token, n};
        struct msghdr m = {0};
        m.msg_name = &ss;
        m.msg_namelen = len;
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        sent = sendmsg(fd, &m, MSG_FASTOPEN);
        if (sent < 0) return stopped("sendmsg(MSG_FASTOPEN)");
    } else {
        int one = 1;
        if (setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof one))
            return stopped("setsockopt(TCP_FASTOPEN_CONNECT)");
        if (connect(fd, (struct sockaddr *)&ss, len)) return stopped("connect");
        sent = write(fd, token, n);
        if (sent < 0) return stopped("write");
    }
    /* The queued bytes still leave after close (a graceful close sends them, then FIN). */
    shutdown(fd, SHUT_WR);
    close(fd);
    return escaped("%zd bytes sent to %s port %s without connect(2)%s", sent, host, port,
                   strcmp(mode, "connect") ? "" : " (connect with TCP_FASTOPEN_CONNECT)");
}

/* ---- 1b. TCP destinations by address (sandbox.connect, --sandbox-connect) --------------- */

/* connect-to HOST PORT TOKEN MODE: a plain connect ("block") or a nonblocking one that waits
 * for EINPROGRESS to finish ("nonblock"), then sends TOKEN. */
static int connect_to(const char *host, const char *port, const char *token, const char *mode) {
    struct sockaddr_storage ss;
    socklen_t len;
    if (make_addr(host, port, &ss, &len)) return error("bad address");
    int nb = !strcmp(mode, "nonblock");
    int fd = socket(ss.ss_family, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return stopped("socket");
    if (connect(fd, (struct sockaddr *)&ss, len)) {
        if (!nb || errno != EINPROGRESS) return stopped("connect");
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 5000) != 1) {
            errno = ETIMEDOUT;
            return stopped("poll for the nonblocking connect");
        }
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el)) return error("getsockopt");
        if (err) {
            errno = err;
            return stopped("nonblocking connect (SO_ERROR)");
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    }
    ssize_t n = write(fd, token, strlen(token));
    if (n < 0) return stopped("write");
    shutdown(fd, SHUT_WR);
    close(fd);
    return escaped("connected to %s port %s (%s connect) and sent %zd bytes", host, port, mode, n);
}

/* connect-race GOOD BAD PORT: a forked helper flips the IPv4 address in a shared page between
 * GOOD and BAD while this process connects to whatever the page holds, up to 5000 times or
 * for 5 seconds, until one reaches BAD (unsandboxed that takes a few tries): a supervisor
 * that checks the address and then lets the kernel read it again would connect some of them
 * to BAD. */
static int connect_race(const char *good, const char *bad, const char *port) {
    struct sockaddr_storage g, b;
    socklen_t gl, bl;
    if (make_addr(good, port, &g, &gl) || make_addr(bad, port, &b, &bl) ||
        g.ss_family != AF_INET || b.ss_family != AF_INET)
        return error("two IPv4 addresses are needed");
    struct sockaddr_in *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return error("mmap");
    memcpy(shared, &g, gl);
    uint32_t ga = ((struct sockaddr_in *)&g)->sin_addr.s_addr;
    uint32_t ba = ((struct sockaddr_in *)&b)->sin_addr.s_addr;
    pid_t flipper = fork();
    if (flipper < 0) return error("fork");
    if (flipper == 0) {
        volatile uint32_t *a = &shared->sin_addr.s_addr;
        for (;;) {
            *a = ba;
            *a = ga;
        }
    }
    int made = 0, refused = 0;
    time_t until = time(NULL) + 5;
    for (int i = 0; i < 5000 && time(NULL) < until; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) break;
        if (connect(fd, (struct sockaddr *)shared, sizeof *shared) == 0) {
            made++;
            struct sockaddr_in peer;
            socklen_t pl = sizeof peer;
            if (!getpeername(fd, (struct sockaddr *)&peer, &pl) && peer.sin_addr.s_addr == ba) {
                kill(flipper, SIGKILL);
                waitpid(flipper, NULL, 0);
                close(fd);
                return escaped("connect %d reached %s port %s while the address was flipped", i,
                               bad, port);
            }
        } else {
            refused++;
        }
        close(fd);
    }
    kill(flipper, SIGKILL);
    waitpid(flipper, NULL, 0);
    errno = EACCES;
    printf("race: %d connects reached %s, %d were refused\n", made, good, refused);
    return stopped("reaching the flipped address");
}

/* ---- 2. listen() without bind() -------------------------------------------------------- */

static int listen_autobind(const char *family) {
    int af = !strcmp(family, "6") ? AF_INET6 : AF_INET;
    int fd = socket(af, SOCK_STREAM, 0);
    if (fd < 0) return stopped("socket");
    if (listen(fd, 1)) return stopped("listen without bind");
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len)) return error("getsockname");
    int port = af == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                              : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    printf("listening port=%d\n", port);
    fflush(stdout);
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) {
        errno = ETIMEDOUT;
        return stopped("accept (nobody connected within 10 s)");
    }
    int c = accept(fd, NULL, NULL);
    if (c < 0) return stopped("accept");
    if (write(c, "L", 1) != 1) return stopped("write to the accepted connection");
    close(c);
    return escaped("accepted a connection from outside on autobound port %d", port);
}

/* ---- 3. inherited descriptors ---------------------------------------------------------- */

static int fdwrite(const char *fdstr, const char *token) {
    int fd = atoi(fdstr);
    ssize_t n = write(fd, token, strlen(token));
    if (n < 0) return stopped("write to the inherited descriptor");
    return escaped("wrote %zd bytes to inherited fd %d", n, fd);
}

/* ---- 4. environment -------------------------------------------------------------------- */

static int env(const char *name) {
    const char *v = getenv(name);
    if (!v) {
        errno = ENOENT;
        return stopped("getenv");
    }
    return escaped("%s=%s", name, v);
}

/* ---- 5. kernel keyrings ---------------------------------------------------------------- */

static long key_search(const char *desc) {
    return syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", desc, 0);
}

static int keyadd(const char *desc, const char *payload) {
    long k = syscall(SYS_add_key, "user", desc, payload, strlen(payload), KEY_SPEC_USER_KEYRING);
    if (k < 0) return error("add_key");
    /* Readable by every process of this uid (not only by possessors), as a desktop's keys are
     * to the user's own processes. */
    uint32_t perm = 0x3f000000 /* possessor: all */ | 0x000b0000 /* user: view read search */;
    if (syscall(SYS_keyctl, KEYCTL_SETPERM, k, perm)) return error("keyctl(SETPERM)");
    printf("key=%ld\n", k);
    return 0;
}

static int keyread(const char *desc) {
    long k = key_search(desc);
    if (k < 0) {
        k = syscall(SYS_request_key, "user", desc, NULL, 0);
        if (k < 0) return stopped("keyctl(SEARCH) and request_key");
    }
    char buf[256];
    long n = syscall(SYS_keyctl, KEYCTL_READ, k, buf, sizeof buf - 1);
    if (n < 0) return stopped("keyctl(READ)");
    buf[n < (long)sizeof buf - 1 ? n : (long)sizeof buf - 1] = 0;
    return escaped("key %ld read=%s", k, buf);
}

static int keyrm(const char *desc) {
    long k = key_search(desc);
    if (k < 0) return error("keyctl(SEARCH)");
    if (syscall(SYS_keyctl, KEYCTL_UNLINK, k, KEY_SPEC_USER_KEYRING)) return error("unlink");
    syscall(SYS_keyctl, KEYCTL_INVALIDATE, k);
    printf("removed key %ld\n", k);
    return 0;
}

/* ---- 6. other processes of the same user ------------------------------------------------ */

static int renice(const char *pid) {
    if (setpriority(PRIO_PROCESS, atoi(pid), 19)) return stopped("setpriority");
    return escaped("set the nice value of %s to 19", pid);
}

static int prlimit_other(const char *pid) {
    struct rlimit old, new;
    if (prlimit(atoi(pid), RLIMIT_NOFILE, NULL, &old)) return stopped("prlimit(get)");
    new = old;
    new.rlim_cur = 77;
    if (prlimit(atoi(pid), RLIMIT_NOFILE, &new, NULL)) return stopped("prlimit(set)");
    return escaped("set RLIMIT_NOFILE of %s to 77 (was %llu)", pid,
                   (unsigned long long)old.rlim_cur);
}

static int affinity(const char *pid, const char *cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(cpu), &set);
    if (sched_setaffinity(atoi(pid), sizeof set, &set)) return stopped("sched_setaffinity");
    return escaped("pinned %s to CPU %s", pid, cpu);
}

static int ioprio(const char *pid) {
    /* IOPRIO_WHO_PROCESS, class IDLE (3) */
    if (syscall(SYS_ioprio_set, 1, atoi(pid), 3 << 13)) return stopped("ioprio_set");
    return escaped("set the I/O class of %s to idle", pid);
}

/* ---- 7. descendants that leave -------------------------------------------------------- */

/* Forks a child that starts its own session, names itself `token` (so that the test finds it
 * whatever pid namespace it is in), writes its pid to DIR/pid and sleeps 30 s. Returns in the
 * parent once the child is set up: 0, or the errno of the child's setsid(2). */
static int spawn_leaver(const char *dir, const char *token, int *setsid_errno) {
    int p[2];
    *setsid_errno = 0;
    if (pipe(p)) return error("pipe");
    pid_t c = fork();
    if (c < 0) return error("fork");
    if (c == 0) {
        close(p[0]);
        int e = 0;
        if (setsid() < 0) {
            e = errno;
            (void)!write(p[1], &e, sizeof e);
            _exit(3);
        }
        prctl(PR_SET_NAME, token);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        char path[4096];
        snprintf(path, sizeof path, "%s/pid", dir);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
        (void)!write(p[1], &e, sizeof e);
        close(p[1]);
        for (int i = 0; i < 30; i++) sleep(1);
        _exit(0);
    }
    close(p[1]);
    int e;
    if (read(p[0], &e, sizeof e) != (ssize_t)sizeof e) return error("the grandchild did not start");
    close(p[0]);
    *setsid_errno = e;
    if (e) waitpid(c, NULL, 0);
    return 0;
}

static int leave(const char *dir, const char *token) {
    int e;
    int r = spawn_leaver(dir, token, &e);
    if (r) return r;
    if (e) {
        errno = e;
        return stopped("setsid in the grandchild");
    }
    return escaped("left a grandchild named %s in its own session", token);
}

/* An MCP "server" for the proxy: leaves a grandchild, says so on stderr (with its TMPDIR, which
 * the test removes if a killed mcpguard could not), then reads its stdin until end of file. */
static int serve_leave(const char *dir, const char *token) {
    int e;
    int r = spawn_leaver(dir, token, &e);
    if (r) return r;
    fprintf(stderr, "leaver-ready setsid-errno=%d tmpdir=%s\n", e, getenv("TMPDIR") ? getenv("TMPDIR") : "");
    fflush(stderr);
    char buf[4096];
    while (read(0, buf, sizeof buf) > 0) {
    }
    return 0;
}

/* ---- 8. terminal injection ------------------------------------------------------------- */

static int tiocsti(const char *text) {
    int fds[] = {0, 1, 2};
    for (int i = 0; i < 3; i++) {
        int ok = 1;
        for (const char *c = text; *c; c++)
            if (ioctl(fds[i], TIOCSTI, c)) {
                ok = 0;
                break;
            }
        if (ok) return escaped("pushed %zu characters into the terminal on fd %d", strlen(text),
                               fds[i]);
    }
    return stopped("ioctl(TIOCSTI) on fds 0, 1 and 2");
}

/* ---- 9. code from writable places ----------------------------------------------------- */

static int copy_file(const char *from, int to) {
    int in = open(from, O_RDONLY);
    if (in < 0) return -1;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(to, buf, n) != n) return -1;
    close(in);
    return n < 0 ? -1 : 0;
}

static int wait_hello(pid_t c, const char *how) {
    int st;
    if (waitpid(c, &st, 0) < 0) return error("waitpid");
    if (WIFEXITED(st) && WEXITSTATUS(st) == 42) return escaped("%s", how);
    errno = WIFEXITED(st) ? 0 : EINTR;
    printf("(the program's status was %d)\n", st);
    return stopped(how);
}

static int ldso(const char *helper) {
    const char *loaders[] = {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1",
                             "/lib/ld-linux.so.2", NULL};
    const char *loader = NULL;
    for (int i = 0; loaders[i]; i++)
        if (access(loaders[i], X_OK) == 0) {
            loader = loaders[i];
            break;
        }
    if (!loader) return error("no dynamic loader found");
    char path[4096];
    snprintf(path, sizeof path, "%s/escape-copy-XXXXXX", tmpdir());
    int fd = mkstemp(path);
    if (fd < 0) return error("mkstemp in TMPDIR");
    if (copy_file(helper, fd)) return error("copy the helper into TMPDIR");
    close(fd);
    chmod(path, 0700);
    pid_t c = fork();
    if (c == 0) {
        execl(loader, loader, path, "hello", (char *)NULL);
        _exit(126);
    }
    int r = wait_hello(c, "ran a program written to TMPDIR through the dynamic loader");
    unlink(path);
    return r;
}

static int memfd(const char *self) {
    int fd = memfd_create("escape", MFD_CLOEXEC);
    if (fd < 0) return stopped("memfd_create");
    if (copy_file(self, fd)) return error("copy the program into the memfd");
    pid_t c = fork();
    if (c == 0) {
        char *argv[] = {"escape", "hello", NULL};
        char *envp[] = {NULL};
        fexecve(fd, argv, envp);
        printf("fexecve: errno %d (%s)\n", errno, strerror(errno));
        fflush(stdout);
        _exit(126);
    }
    return wait_hello(c, "ran a program from a memfd (memfd_create + fexecve)");
}

static int mmapexec(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned char code[] = {0xb8, 42, 0, 0, 0, 0xc3}; /* mov eax, 42; ret */
#elif defined(__aarch64__)
    unsigned char code[] = {0x40, 0x05, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6}; /* mov w0,#42; ret */
#else
    errno = ENOSYS;
    return error("no machine code for this architecture");
#endif
    char path[4096];
    snprintf(path, sizeof path, "%s/escape-code-XXXXXX", tmpdir());
    int fd = mkstemp(path);
    if (fd < 0) return error("mkstemp in TMPDIR");
    if (write(fd, code, sizeof code) != (ssize_t)sizeof code) return error("write the code");
    close(fd);
    fd = open(path, O_RDONLY);
    unlink(path);
    if (fd < 0) return error("reopen the code file");
    void *m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) return stopped("mmap(PROT_EXEC) of a file in TMPDIR");
    int (*fn)(void) = (int (*)(void))m;
    int r = fn();
    if (r != 42) {
        errno = 0;
        return error("the mapped code did not return 42");
    }
    return escaped("executed code mapped from a file in TMPDIR (it returned %d)", r);
}

/* ---- 10. metadata of files outside every grant ---------------------------------------- */

static int do_chmod(const char *f) {
    if (chmod(f, 0604)) return stopped("chmod");
    return escaped("chmod 0604 %s", f);
}

static int do_chown(const char *f, const char *uid, const char *gid) {
    if (chown(f, atoi(uid), atoi(gid))) return stopped("chown");
    return escaped("chown %s:%s %s", uid, gid, f);
}

static int do_utimes(const char *f) {
    struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
    if (utimes(f, tv)) return stopped("utimes");
    return escaped("set the times of %s to 1000000000", f);
}

static int do_setxattr(const char *f) {
    if (setxattr(f, "user.mcpguard_probe", "escaped", 7, 0)) return stopped("setxattr");
    return escaped("set user.mcpguard_probe on %s", f);
}

/* ---- 11. information about ungranted paths ------------------------------------------ */

static int info(const char *f) {
    struct stat st;
    int ok = 0;
    if (stat(f, &st) == 0) {
        printf("stat: size %lld mode %o uid %d\n", (long long)st.st_size, st.st_mode,
               (int)st.st_uid);
        ok++;
    } else
        printf("stat: errno %d\n", errno);
    if (access(f, F_OK) == 0) {
        printf("access: exists\n");
        ok++;
    } else
        printf("access: errno %d\n", errno);
    int in = inotify_init1(IN_CLOEXEC);
    if (in >= 0 && inotify_add_watch(in, f, IN_ALL_EVENTS) >= 0) {
        printf("inotify_add_watch: watching\n");
        ok++;
    } else
        printf("inotify: errno %d\n", errno);
    if (ok) return escaped("%d of stat, access and inotify_add_watch worked", ok);
    errno = EACCES;
    return stopped("stat, access and inotify_add_watch");
}

/* ---- 12. privileged operations (root) ------------------------------------------------ */

struct cap_header {
    uint32_t version;
    int pid;
};
struct cap_data {
    uint32_t effective, permitted, inheritable;
};

static int caps(void) {
    struct cap_header h = {0x20080522, 0};
    struct cap_data d[2];
    if (syscall(SYS_capget, &h, d)) return error("capget");
    unsigned long long eff = d[0].effective | (unsigned long long)d[1].effective << 32;
    unsigned long long prm = d[0].permitted | (unsigned long long)d[1].permitted << 32;
    unsigned long long inh = d[0].inheritable | (unsigned long long)d[1].inheritable << 32;
    unsigned long long bnd = 0, amb = 0;
    for (int c = 0; c < 64; c++) {
        int b = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
        if (b < 0) break;
        if (b) bnd |= 1ULL << c;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1) amb |= 1ULL << c;
    }
    printf("CapEff %llx CapPrm %llx CapInh %llx CapBnd %llx CapAmb %llx\n", eff, prm, inh, bnd,
           amb);
    if (eff | prm | inh | bnd | amb) return escaped("the capability sets are not empty");
    errno = EPERM;
    return stopped("holding any capability (every set is empty)");
}

/* The node itself is the escape (CAP_MKNOD): a block device in a writable directory. Opening
 * it may still be refused by a device cgroup (containers, CI VMs); the line says which. */
static int do_mknod(const char *maj, const char *min) {
    char path[4096];
    snprintf(path, sizeof path, "%s/escape-blk-%d", tmpdir(), (int)getpid());
    if (mknod(path, S_IFBLK | 0600, makedev(atoi(maj), atoi(min)))) return stopped("mknod");
    struct stat st;
    int is_blk = stat(path, &st) == 0 && S_ISBLK(st.st_mode);
    int fd = open(path, O_RDONLY);
    int open_errno = errno;
    unlink(path);
    if (!is_blk) {
        errno = 0;
        return error("mknod returned 0 but no block device is there");
    }
    if (fd < 0)
        return escaped("made block device %s:%s (opening it: errno %d, %s)", maj, min,
                       open_errno, strerror(open_errno));
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf);
    return escaped("made block device %s:%s, opened it and read %zd bytes", maj, min, n);
}

static int perf(const char *pid) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    int fd = syscall(SYS_perf_event_open, &a, atoi(pid), -1, -1, 0);
    if (fd < 0) return stopped("perf_event_open on another process");
    usleep(20000);
    unsigned long long v = 0;
    if (read(fd, &v, sizeof v) != sizeof v) return stopped("read of the perf counter");
    return escaped("counting the task clock of %s (%llu ns so far)", pid, v);
}

static int bpf_map(void) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = 4;
    a.value_size = 4;
    a.max_entries = 1;
    int fd = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a);
    if (fd < 0) return stopped("bpf(BPF_MAP_CREATE)");
    return escaped("created a BPF map (fd %d)", fd);
}

static int bpf_prog(void) {
    struct bpf_insn insns[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0}, /* r0 = 0 */
        {.code = BPF_JMP | BPF_EXIT},
    };
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    a.insns = (uint64_t)(uintptr_t)insns;
    a.insn_cnt = 2;
    a.license = (uint64_t)(uintptr_t) "GPL";
    int fd = syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof a);
    if (fd < 0) return stopped("bpf(BPF_PROG_LOAD)");
    return escaped("loaded a BPF socket filter program (fd %d)", fd);
}

/* A mount mark (CAP_SYS_ADMIN) on TMPDIR's mount, then an open there: the event arrives. */
static int fanotify(void) {
    int fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY);
    if (fd < 0) return stopped("fanotify_init");
    if (fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_OPEN, AT_FDCWD, tmpdir()))
        return stopped("fanotify_mark of TMPDIR's mount");
    char path[4096];
    snprintf(path, sizeof path, "%s/escape-fan-XXXXXX", tmpdir());
    int f = mkstemp(path);
    if (f < 0) return error("mkstemp in TMPDIR");
    close(f);
    f = open(path, O_RDONLY);
    unlink(path);
    if (f >= 0) close(f);
    struct pollfd p = {fd, POLLIN, 0};
    char buf[4096];
    ssize_t n = poll(&p, 1, 2000) == 1 ? read(fd, buf, sizeof buf) : -1;
    if (n < (ssize_t)sizeof(struct fanotify_event_metadata)) {
        errno = ETIMEDOUT;
        return error("the mark was accepted but no event arrived");
    }
    return escaped("watching every open(2) on TMPDIR's mount with fanotify (an event arrived)");
}

static int do_sethostname(void) {
    char name[256];
    if (gethostname(name, sizeof name)) return error("gethostname");
    if (sethostname(name, strlen(name))) return stopped("sethostname (to the current name)");
    return escaped("sethostname(%s) (the current name, nothing changed)", name);
}

static int do_unshare(const char *what) {
    int flags = !strcmp(what, "user") ? CLONE_NEWUSER : CLONE_NEWNS;
    if (unshare(flags)) return stopped(flags == CLONE_NEWUSER ? "unshare(CLONE_NEWUSER)"
                                                              : "unshare(CLONE_NEWNS)");
    return escaped("unshare(%s) succeeded", what);
}

/* clone3 carries its flags in memory, out of a seccomp filter's sight: a new user namespace
 * made this way would hand the child every capability inside it. */
static int do_clone3_user(void) {
    struct {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    } args = {0};
    args.flags = CLONE_NEWUSER;
    args.exit_signal = SIGCHLD;
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0) return stopped("clone3(CLONE_NEWUSER)");
    if (pid == 0) _exit(0);
    waitpid((pid_t)pid, NULL, 0);
    return escaped("clone3(CLONE_NEWUSER) started a child in a new user namespace");
}

static int do_mount(void) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/escape-mnt-XXXXXX", tmpdir());
    if (!mkdtemp(dir)) return error("mkdtemp");
    if (mount("escape", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k")) {
        int r = stopped("mount of a tmpfs");
        rmdir(dir);
        return r;
    }
    struct statfs s;
    int is_tmpfs = statfs(dir, &s) == 0 && s.f_type == TMPFS_MAGIC;
    umount2(dir, MNT_DETACH);
    rmdir(dir);
    return escaped("mounted a tmpfs on %s (statfs says tmpfs: %d; unmounted again)", dir,
                   is_tmpfs);
}

static int do_setns(void) {
    /* Its own UTS namespace: setns needs CAP_SYS_ADMIN and changes nothing. */
    int pfd = syscall(SYS_pidfd_open, getpid(), 0);
    if (pfd < 0) return stopped("pidfd_open");
    if (setns(pfd, CLONE_NEWUTS)) return stopped("setns(CLONE_NEWUTS)");
    return escaped("setns into its own UTS namespace (needs CAP_SYS_ADMIN)");
}

static int do_userfaultfd(void) {
    int fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    if (fd < 0) return stopped("userfaultfd");
    struct uffdio_api api = {.api = UFFD_API};
    if (ioctl(fd, UFFDIO_API, &api)) return stopped("UFFDIO_API");
    return escaped("opened a userfaultfd (fd %d)", fd);
}

static int settime(void) {
    /* settimeofday(NULL, NULL) passes the CAP_SYS_TIME check and changes nothing. */
    if (syscall(SYS_settimeofday, NULL, NULL)) return stopped("settimeofday(NULL, NULL)");
    return escaped("settimeofday passed the CAP_SYS_TIME check (nothing changed)");
}

/* acct(2) checks CAP_SYS_PACCT before it looks at the file: a path that does not exist gives
 * ENOENT when the check passed (and changes nothing, accounting stays as it was), EPERM when
 * it did not. */
static int do_acct(void) {
    if (acct("/nonexistent-mcpguard-probe/acct") == 0) return escaped("acct() switched on?!");
    if (errno == ENOENT)
        return escaped("acct() passed the CAP_SYS_PACCT check (ENOENT for a missing file; "
                       "nothing changed)");
    return stopped("acct()");
}

/* The kernel log: its size is readable by root (and by anyone where dmesg_restrict = 0);
 * nothing is read or cleared. */
static int do_syslog(void) {
    int n = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
    if (n < 0) return stopped("syslog(SYSLOG_ACTION_SIZE_BUFFER)");
    return escaped("syslog(SYSLOG_ACTION_SIZE_BUFFER) answered %d: the kernel log is readable", n);
}

/* swapoff of a missing file: ENOENT comes after the CAP_SYS_ADMIN check; no swap changes. */
static int do_swapoff(void) {
    if (swapoff("/nonexistent-mcpguard-probe/swap") == 0) return escaped("swapoff succeeded?!");
    if (errno == ENOENT)
        return escaped("swapoff passed the CAP_SYS_ADMIN check (ENOENT for a missing file; "
                       "nothing changed)");
    return stopped("swapoff");
}

static int ifflags(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return stopped("socket for the interface ioctl");
    struct ifreq r;
    memset(&r, 0, sizeof r);
    strcpy(r.ifr_name, "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &r)) return stopped("SIOCGIFFLAGS on lo");
    if (ioctl(fd, SIOCSIFFLAGS, &r)) return stopped("SIOCSIFFLAGS on lo (its current flags)");
    return escaped("SIOCSIFFLAGS on lo with its current flags %#x", r.ifr_flags);
}

/* -------------------------------------------------------------------------------------- */

/* ---- 13. SysV IPC of the host ---------------------------------------------------------- */

/* Attaches the host's shared memory segment ID, reads it, and overwrites its start with
 * "overwritten" (the test reads the segment afterwards). */
static int shm(const char *id) {
    char *mem = shmat(atoi(id), NULL, 0);
    if (mem == (char *)-1) return stopped("shmat");
    char seen[64];
    snprintf(seen, sizeof seen, "%s", mem);
    strcpy(mem, "overwritten");
    shmdt(mem);
    return escaped("attached segment %s, read \"%s\" and overwrote it", id, seen);
}

/* Takes a message from the host's message queue ID. */
static int msgq(const char *id) {
    struct {
        long mtype;
        char text[64];
    } m;
    memset(&m, 0, sizeof m);
    ssize_t n = msgrcv(atoi(id), &m, sizeof m.text - 1, 0, IPC_NOWAIT);
    if (n < 0) return stopped("msgrcv");
    return escaped("took \"%s\" from queue %s", m.text, id);
}

/* ---- 14. mounts that arrive later ------------------------------------------------------ */

/* Announces itself with DIR/ready, then waits up to 10 s for a tmpfs to appear on DIR/sub (the
 * test mounts one on the host) and writes DIR/sub/written into it. */
static int latemount(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/ready", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return error("creating the ready file");
    close(fd);
    snprintf(path, sizeof path, "%s/sub", dir);
    for (int i = 0; i < 100; i++) {
        struct statfs st;
        if (statfs(path, &st) == 0 && st.f_type == TMPFS_MAGIC) {
            snprintf(path, sizeof path, "%s/sub/written", dir);
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0) return stopped("writing into the new mount");
            close(fd);
            return escaped("wrote %s on a file system mounted after the start", path);
        }
        usleep(100 * 1000);
    }
    errno = ENOENT;
    return stopped("waiting 10 s for the host's new mount to appear");
}

/* ---- 15. named UNIX sockets through socketpair --------------------------------------------- */

/* A socket pair of TYPE ("dgram" or "stream") sends TOKEN to the named datagram socket PATH,
 * with sendto and, failing that, connect + send. */
static int pair_send(const char *type, const char *path, const char *token) {
    int sv[2];
    int ty = !strcmp(type, "stream") ? SOCK_STREAM : SOCK_DGRAM;
    if (socketpair(AF_UNIX, ty | SOCK_CLOEXEC, 0, sv)) return stopped("socketpair");
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (sendto(sv[0], token, strlen(token), 0, (struct sockaddr *)&a, sizeof a) >= 0)
        return escaped("sent %s to %s with sendto on a %s pair", token, path, type);
    int e = errno;
    if (connect(sv[0], (struct sockaddr *)&a, sizeof a) == 0 &&
        send(sv[0], token, strlen(token), 0) >= 0)
        return escaped("sent %s to %s with connect + send on a %s pair", token, path, type);
    errno = e;
    return stopped("sendto (and connect) to the named socket");
}

/* ---- 16. process control by group, system calls newer than the filter ---------------------- */

/* setpriority(PRIO_PGRP, PGID, 19); PGID 0 is the caller's own process group, which holds
 * mcpguard's waiter outside the namespaces. */
static int renice_group(const char *pgid) {
    if (setpriority(PRIO_PGRP, atoi(pgid), 19)) return stopped("setpriority(PRIO_PGRP)");
    return escaped("set the nice value of process group %s to 19", pgid);
}

/* Calls the system calls numbered FROM to TO with harmless arguments (descriptor -1, null
 * pointers); one that answers anything but ENOSYS reached the kernel. */
static int newcalls(const char *from, const char *to) {
    for (long nr = atol(from); nr <= atol(to); nr++) {
        errno = 0;
        if (syscall(nr, -1L, 0L, 0L, 0L, 0L, 0L) < 0 && errno == ENOSYS) continue;
        return escaped("system call %ld reached the kernel (errno %d, %s)", nr, errno,
                       strerror(errno));
    }
    errno = ENOSYS;
    return stopped("every system call above the filter's tables");
}

/* ---- 17. limits ----------------------------------------------------------------------- */

/* Forks up to N children that wait to be killed; reports how many it got. */
static int forkloop(const char *count) {
    int n = atoi(count), got = 0, e = 0;
    pid_t *kids = calloc(n, sizeof *kids);
    if (!kids) return error("calloc");
    for (; got < n; got++) {
        pid_t c = fork();
        if (c < 0) {
            e = errno;
            break;
        }
        if (c == 0) {
            pause();
            _exit(0);
        }
        kids[got] = c;
    }
    for (int i = 0; i < got; i++) kill(kids[i], SIGKILL);
    for (int i = 0; i < got; i++) waitpid(kids[i], NULL, 0);
    if (got == n) return escaped("started %d processes", n);
    errno = e;
    printf("forked %d of %d\n", got, n);
    return stopped("fork");
}

/* Writes MB MiB into $TMPDIR/big, then removes it. */
static int bigwrite(const char *mb) {
    char path[4096];
    snprintf(path, sizeof path, "%s/big", tmpdir());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return error("creating $TMPDIR/big");
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    int n = atoi(mb), done = 0;
    for (; done < n; done++) {
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) break;
    }
    int e = errno;
    close(fd);
    unlink(path);
    if (done == n) return escaped("wrote %d MiB into %s", n, path);
    errno = e;
    printf("wrote %d of %d MiB\n", done, n);
    return stopped("write");
}

/* Maps MB MiB of private writable memory (without touching it, so nothing is used). */
static int bigmap(const char *mb) {
    size_t len = (size_t)atol(mb) << 20;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return stopped("mmap");
    munmap(p, len);
    return escaped("mapped %s MiB of writable memory", mb);
}

/* ---- 18. files ------------------------------------------------------------------------ */

static int readfile(const char *f) {
    char buf[64] = {0};
    int fd = open(f, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return stopped("open");
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) return stopped("read");
    return escaped("read \"%s\" from %s", buf, f);
}

/* ---- 19. files trusted later inside a writable grant ----------------------------------- */

/* Appends `text` to `f`, creating it (mode 0755, as a hook would be). */
static int plant(const char *f, const char *text) {
    int fd = open(f, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0755);
    if (fd < 0) return stopped("open");
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len) {
        int e = errno;
        close(fd);
        errno = e;
        return stopped("write");
    }
    close(fd);
    return escaped("appended %zu bytes to %s", len, f);
}

/* Moves `from` to `to` (a folder with read-only files in it, moved away to make a new one). */
static int move(const char *from, const char *to) {
    if (rename(from, to)) return stopped("rename");
    return escaped("moved %s to %s", from, to);
}

/* ---- 20. a system call off the allowlist -------------------------------------------- */

/* kcmp(2) on itself: harmless, needs no privilege, and in no @system-service set. */
static int offlist(void) {
    long r = syscall(SYS_kcmp, (long)getpid(), (long)getpid(), 0L, 0L, 0L);
    if (r < 0) return stopped("kcmp");
    return escaped("kcmp answered %ld", r);
}

/* ---- 21. the keys of [sandbox] and [sandbox.limits] ---------------------------------- */

/* Raises the soft limit of RESOURCE to its hard limit, as a server would before a descriptor
 * flood or a big reservation: a limit that only the soft value holds is no limit. */
static void raise_soft(int resource) {
    struct rlimit r;
    if (getrlimit(resource, &r) == 0 && r.rlim_cur != r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(resource, &r);
    }
}

/* Holds N more descriptors open at once (duplicates of stderr). */
static int openmany(const char *count) {
    raise_soft(RLIMIT_NOFILE);
    int n = atoi(count), got = 0, e = 0;
    int *fds = calloc(n, sizeof *fds);
    if (!fds) return error("calloc");
    for (; got < n; got++) {
        int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
            e = errno;
            break;
        }
        fds[got] = fd;
    }
    for (int i = 0; i < got; i++) close(fds[i]);
    if (got == n) return escaped("held %d more descriptors open", n);
    errno = e;
    printf("opened %d of %d\n", got, n);
    return stopped("dup");
}

/* Reserves MB MiB of address space with no access (PROT_NONE: counted against RLIMIT_AS, not
 * RLIMIT_DATA), as V8 and WebAssembly do. */
static int reserve(const char *mb) {
    raise_soft(RLIMIT_AS);
    size_t len = (size_t)atol(mb) << 20;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return stopped("mmap(PROT_NONE)");
    munmap(p, len);
    return escaped("reserved %s MiB of address space", mb);
}

/* A child with a secret in its memory crashes in $TMPDIR (the soft core limit raised first):
 * escaped when the kernel wrote a core file. */
static int coredump(void) {
    raise_soft(RLIMIT_CORE);
    struct rlimit r;
    getrlimit(RLIMIT_CORE, &r);
    printf("core limit: soft %lld, hard %lld\n", (long long)r.rlim_cur, (long long)r.rlim_max);
    printf("RLIMIT_CORE raised above 0: %s\n", r.rlim_cur > 0 ? "yes" : "no");
    if (chdir(tmpdir())) return error("chdir $TMPDIR");
    pid_t c = fork();
    if (c < 0) return error("fork");
    if (c == 0) {
        static volatile char secret[] = "core-secret-token";
        (void)secret[0];
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    int status = 0;
    if (waitpid(c, &status, 0) != c) return error("waitpid");
    if (!WIFSIGNALED(status)) return error("the child did not crash");
    struct stat st;
    char name[64];
    snprintf(name, sizeof name, "core.%d", (int)c);
    const char *file = stat("core", &st) == 0 ? "core" : stat(name, &st) == 0 ? name : NULL;
    if (file) unlink(file);
    if (WCOREDUMP(status))
        return escaped("the crashed child dumped core (%s, %lld bytes)", file ? file : "?",
                       file ? (long long)st.st_size : -1LL);
    errno = 0;
    return stopped("dumping core (the kernel wrote none)");
}

/* Connects a UNIX stream socket of its own to PATH (`@NAME`: the abstract NAME) and sends
 * TOKEN. */
static int unix_send(const char *path, const char *token) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return stopped("socket(AF_UNIX)");
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    socklen_t len;
    if (path[0] == '@') {
        size_t n = strlen(path + 1);
        if (n >= sizeof a.sun_path) return error("name too long");
        memcpy(a.sun_path + 1, path + 1, n);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    } else {
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        len = sizeof a;
    }
    if (connect(fd, (struct sockaddr *)&a, len)) return stopped("connect");
    if (send(fd, token, strlen(token), 0) < 0) return stopped("send");
    close(fd);
    return escaped("sent %s to %s", token, path);
}

/* Asks the kernel's routing netlink for the machine's network interfaces. */
static int netlink(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */);
    if (fd < 0) return stopped("socket(AF_NETLINK)");
    struct {
        struct {
            uint32_t len;
            uint16_t type, flags;
            uint32_t seq, pid;
        } h;
        unsigned char family, pad[3];
    } req;
    memset(&req, 0, sizeof req);
    req.h.len = sizeof req;
    req.h.type = 18;         /* RTM_GETLINK */
    req.h.flags = 0x1 | 0x300; /* NLM_F_REQUEST | NLM_F_DUMP */
    req.h.seq = 1;
    if (send(fd, &req, sizeof req, 0) < 0) return stopped("send (netlink)");
    static char buf[65536];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) return stopped("recv (netlink)");
    return escaped("netlink answered %zd bytes about the machine's interfaces", n);
}

/* Connects an MPTCP socket (IPPROTO_MPTCP, 262) to 127.0.0.1:PORT and sends TOKEN: MPTCP
 * is a protocol of its own, which Landlock's TCP rules do not cover. */
static int mptcp(const char *port, const char *token) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 262 /* IPPROTO_MPTCP */);
    if (fd < 0) return stopped("socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) return stopped("connect (MPTCP)");
    if (send(fd, token, strlen(token), 0) < 0) return stopped("send (MPTCP)");
    close(fd);
    return escaped("sent %s over MPTCP to port %s", token, port);
}

/* ---- 22. the rest of the report's enforced rules --------------------------------------- */

/* Binds 127.0.0.1:PORT, listens, and sends TOKEN to the first connection within 4 s. */
static int bindlisten(const char *port, const char *token) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return stopped("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a)) return stopped("bind");
    if (listen(fd, 4)) return stopped("listen");
    printf("listening on %s\n", port);
    fflush(stdout);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 4000) != 1) return error("nobody connected within 4 s");
    int c = accept(fd, NULL, NULL);
    if (c < 0) return error("accept");
    if (send(c, token, strlen(token), 0) < 0) return error("send");
    close(c);
    return escaped("accepted a connection on port %s and sent %s", port, token);
}

/* One way to another process's memory or descriptors, or past seccomp, chosen by MODE and
 * judged alone: `process_vm_readv` reads a secret from a child's memory, `ptrace` attaches to
 * the child, `pidfd_getfd` takes the child's stdout, `process_madvise` advises the kernel about
 * the child's memory (MADV_COLD), `io_uring_setup` creates a ring (whose operations no seccomp
 * filter sees). The victim is this probe's own child, the easiest target there is. */
static int crossmem(const char *mode) {
    static char secret[32] = "cross-process-secret";
    /* A page of the child's memory for process_madvise, whose range must be page-aligned. */
    char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return error("mmap");
    strcpy(page, secret);
    pid_t c = fork();
    if (c < 0) return error("fork");
    if (c == 0) {
        pause();
        _exit(0);
    }
    int worked = 0;
    int e = 0;
    if (!strcmp(mode, "process_vm_readv")) {
        char got[32] = {0};
        struct iovec local = {.iov_base = got, .iov_len = sizeof got};
        struct iovec remote = {.iov_base = secret, .iov_len = sizeof secret};
        worked = syscall(SYS_process_vm_readv, c, &local, 1L, &remote, 1L, 0L) > 0 &&
                 !strcmp(got, secret);
    } else if (!strcmp(mode, "ptrace")) {
        worked = syscall(SYS_ptrace, 0x4206L /* PTRACE_SEIZE */, (long)c, 0L, 0L) == 0;
        e = errno;
        if (worked) syscall(SYS_ptrace, 17L /* PTRACE_DETACH */, (long)c, 0L, 0L);
    } else if (!strcmp(mode, "pidfd_getfd")) {
        long pidfd = syscall(SYS_pidfd_open, (long)c, 0L);
        worked = pidfd >= 0 && syscall(SYS_pidfd_getfd, pidfd, 1L, 0L) >= 0;
    } else if (!strcmp(mode, "process_madvise")) {
        long pidfd = syscall(SYS_pidfd_open, (long)c, 0L);
        struct iovec v = {.iov_base = page, .iov_len = 4096};
        worked = pidfd >= 0 && syscall(SYS_process_madvise, pidfd, &v, 1L, 20L /* MADV_COLD */,
                                       0L) >= 0;
    } else if (!strcmp(mode, "io_uring_setup")) {
        unsigned char params[120];
        memset(params, 0, sizeof params);
        worked = syscall(SYS_io_uring_setup, 4L, params) >= 0;
    } else {
        kill(c, SIGKILL);
        waitpid(c, NULL, 0);
        return error("unknown mode");
    }
    if (!e) e = errno;
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    if (worked) return escaped("%s reached another process or the kernel's ring", mode);
    errno = e;
    return stopped(mode);
}

/* Reports the kernel's NoNewPrivs flag for this process (from /proc/self/status) and whether
 * it gained euid 0 from a set-user-id program. Escaped when it gained euid 0, or when the flag is
 * not set: then the next set-user-id or file-capability program it executes would gain its
 * privilege, whichever program that is. */
static int euid(void) {
    printf("uid %d, euid %d\n", (int)getuid(), (int)geteuid());
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return error("open /proc/self/status");
    char line[256], nnp[256] = "";
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "NoNewPrivs:", 11)) snprintf(nnp, sizeof nnp, "%s", line);
    fclose(f);
    if (!nnp[0]) return error("no NoNewPrivs line in /proc/self/status");
    printf("%s", nnp);
    if (geteuid() == 0 && getuid() != 0) return escaped("gained euid 0 (uid %d)", (int)getuid());
    if (strcmp(nnp, "NoNewPrivs:\t1\n"))
        return escaped("no_new_privs is not set: a set-user-id program would gain its owner's "
                       "privilege");
    errno = EPERM;
    return stopped("gaining privilege through the set-user-id bit (no_new_privs is set)");
}

/* Executes PATH (a set-user-id copy of this program) as `PATH euid`. */
static int setuid_exec(const char *path) {
    fflush(stdout);
    execl(path, path, "euid", (char *)NULL);
    return stopped("execl");
}

/* ---- 23. a set-user-ID file in a writable grant ------------------------------------------ */

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* Makes `f` set-user-ID (and set-group-ID) with `how`: "chmod" an existing file, "create" a
 * new one with open(O_CREAT), "openat2" a new one with openat2(2), whose mode is out of a
 * seccomp filter's sight. Escaped only when the file has the bit afterwards. */
static int setuid_file(const char *how, const char *f) {
    int r;
    if (!strcmp(how, "chmod")) {
        r = chmod(f, 06755);
    } else if (!strcmp(how, "create")) {
        r = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 06755);
        if (r >= 0) close(r);
    } else if (!strcmp(how, "openat2")) {
        struct {
            uint64_t flags, mode, resolve;
        } how2 = {O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 06755, 0};
        r = (int)syscall(SYS_openat2, AT_FDCWD, f, &how2, sizeof how2);
        if (r >= 0) close(r);
    } else {
        errno = EINVAL;
        return error("unknown way");
    }
    if (r < 0) return stopped(how);
    struct stat st;
    if (stat(f, &st)) return error("stat");
    if (!(st.st_mode & (S_ISUID | S_ISGID))) {
        errno = 0;
        return stopped("the set-ID bits did not stick");
    }
    return escaped("%s made %s mode %o, owner %d", how, f, st.st_mode & 07777, (int)st.st_uid);
}

#define NEED(n)                                                                              \
    do {                                                                                     \
        if (argc < (n) + 2) {                                                                \
            fprintf(stderr, "usage: escape %s: %d arguments\n", probe_name, n);              \
            return 2;                                                                        \
        }                                                                                    \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: escape PROBE ARGS...\n");
        return 2;
    }
    probe_name = argv[1];
    const char *p = argv[1];
    if (!strcmp(p, "hello")) {
        printf("hello-ran\n");
        fflush(stdout);
        return 42;
    }
    /* Helpers run by the test itself, outside the sandbox: no start marker. */
    if (!strcmp(p, "keyadd")) {
        NEED(2);
        return keyadd(argv[2], argv[3]);
    }
    if (!strcmp(p, "keyrm")) {
        NEED(1);
        return keyrm(argv[2]);
    }
    if (!strcmp(p, "serve-leave")) {
        NEED(2);
        return serve_leave(argv[2], argv[3]);
    }
    printf("probe %s start\n", p);
    fflush(stdout);
    if (!strcmp(p, "tfo-sendto") || !strcmp(p, "tfo-sendmsg") || !strcmp(p, "tfo-connect")) {
        NEED(3);
        return tfo(p + 4, argv[2], argv[3], argv[4]);
    }
    if (!strcmp(p, "connect-to")) {
        NEED(4);
        return connect_to(argv[2], argv[3], argv[4], argv[5]);
    }
    if (!strcmp(p, "connect-race")) {
        NEED(3);
        return connect_race(argv[2], argv[3], argv[4]);
    }
    if (!strcmp(p, "listen")) {
        NEED(1);
        return listen_autobind(argv[2]);
    }
    if (!strcmp(p, "fdwrite")) {
        NEED(2);
        return fdwrite(argv[2], argv[3]);
    }
    if (!strcmp(p, "getenv")) {
        NEED(1);
        return env(argv[2]);
    }
    if (!strcmp(p, "keyread")) {
        NEED(1);
        return keyread(argv[2]);
    }
    if (!strcmp(p, "setpriority")) {
        NEED(1);
        return renice(argv[2]);
    }
    if (!strcmp(p, "prlimit")) {
        NEED(1);
        return prlimit_other(argv[2]);
    }
    if (!strcmp(p, "affinity")) {
        NEED(2);
        return affinity(argv[2], argv[3]);
    }
    if (!strcmp(p, "ioprio")) {
        NEED(1);
        return ioprio(argv[2]);
    }
    if (!strcmp(p, "leave")) {
        NEED(2);
        return leave(argv[2], argv[3]);
    }
    if (!strcmp(p, "tiocsti")) {
        NEED(1);
        return tiocsti(argv[2]);
    }
    if (!strcmp(p, "ldso")) {
        NEED(1);
        return ldso(argv[2]);
    }
    if (!strcmp(p, "memfd")) {
        NEED(1);
        return memfd(argv[2]);
    }
    if (!strcmp(p, "mmapexec")) return mmapexec();
    if (!strcmp(p, "chmod")) {
        NEED(1);
        return do_chmod(argv[2]);
    }
    if (!strcmp(p, "chown")) {
        NEED(3);
        return do_chown(argv[2], argv[3], argv[4]);
    }
    if (!strcmp(p, "utimes")) {
        NEED(1);
        return do_utimes(argv[2]);
    }
    if (!strcmp(p, "setxattr")) {
        NEED(1);
        return do_setxattr(argv[2]);
    }
    if (!strcmp(p, "stat")) {
        NEED(1);
        return info(argv[2]);
    }
    if (!strcmp(p, "caps")) return caps();
    if (!strcmp(p, "mknod")) {
        NEED(2);
        return do_mknod(argv[2], argv[3]);
    }
    if (!strcmp(p, "perf")) {
        NEED(1);
        return perf(argv[2]);
    }
    if (!strcmp(p, "bpf-map")) return bpf_map();
    if (!strcmp(p, "bpf-prog")) return bpf_prog();
    if (!strcmp(p, "fanotify")) return fanotify();
    if (!strcmp(p, "sethostname")) return do_sethostname();
    if (!strcmp(p, "unshare-user")) return do_unshare("user");
    if (!strcmp(p, "unshare-ns")) return do_unshare("ns");
    if (!strcmp(p, "clone3-user")) return do_clone3_user();
    if (!strcmp(p, "mount")) return do_mount();
    if (!strcmp(p, "setns")) return do_setns();
    if (!strcmp(p, "userfaultfd")) return do_userfaultfd();
    if (!strcmp(p, "settime")) return settime();
    if (!strcmp(p, "acct")) return do_acct();
    if (!strcmp(p, "syslog")) return do_syslog();
    if (!strcmp(p, "swapoff")) return do_swapoff();
    if (!strcmp(p, "ifflags")) return ifflags();
    if (!strcmp(p, "shm")) {
        NEED(1);
        return shm(argv[2]);
    }
    if (!strcmp(p, "msgq")) {
        NEED(1);
        return msgq(argv[2]);
    }
    if (!strcmp(p, "latemount")) {
        NEED(1);
        return latemount(argv[2]);
    }
    if (!strcmp(p, "pair-send")) {
        NEED(3);
        return pair_send(argv[2], argv[3], argv[4]);
    }
    if (!strcmp(p, "renice-group")) {
        NEED(1);
        return renice_group(argv[2]);
    }
    if (!strcmp(p, "newcalls")) {
        NEED(2);
        return newcalls(argv[2], argv[3]);
    }
    if (!strcmp(p, "forkloop")) {
        NEED(1);
        return forkloop(argv[2]);
    }
    if (!strcmp(p, "bigwrite")) {
        NEED(1);
        return bigwrite(argv[2]);
    }
    if (!strcmp(p, "bigmap")) {
        NEED(1);
        return bigmap(argv[2]);
    }
    if (!strcmp(p, "read")) {
        NEED(1);
        return readfile(argv[2]);
    }
    if (!strcmp(p, "offlist")) return offlist();
    if (!strcmp(p, "openmany")) {
        NEED(1);
        return openmany(argv[2]);
    }
    if (!strcmp(p, "reserve")) {
        NEED(1);
        return reserve(argv[2]);
    }
    if (!strcmp(p, "coredump")) return coredump();
    if (!strcmp(p, "unix-send")) {
        NEED(2);
        return unix_send(argv[2], argv[3]);
    }
    if (!strcmp(p, "netlink")) return netlink();
    if (!strcmp(p, "mptcp")) {
        NEED(2);
        return mptcp(argv[2], argv[3]);
    }
    if (!strcmp(p, "bindlisten")) {
        NEED(2);
        return bindlisten(argv[2], argv[3]);
    }
    if (!strcmp(p, "crossmem")) {
        NEED(1);
        return crossmem(argv[2]);
    }
    if (!strcmp(p, "euid")) return euid();
    if (!strcmp(p, "setuid-exec")) {
        NEED(1);
        return setuid_exec(argv[2]);
    }
    if (!strcmp(p, "plant")) {
        NEED(2);
        return plant(argv[2], argv[3]);
    }
    if (!strcmp(p, "move")) {
        NEED(2);
        return move(argv[2], argv[3]);
    }
    if (!strcmp(p, "setuid")) {
        NEED(2);
        return setuid_file(argv[2], argv[3]);
    }
    printf("ERROR: unknown probe %s\n", p);
    return 2;
}
