//! What a plugin's worker process (process isolation) does before it
//! loads the library: it closes every file descriptor it inherited but its
//! pipes (stdin, stdout, stderr), and, when `plugin_host.memory_limit_mb`
//! says, limits its address space, so that the operating system stops a
//! plugin that allocates without bound. It also watches its parent: when
//! the host that started it is gone (killed, crashed), the worker ends
//! itself, even while a plugin call hangs. The one `unsafe` call closes an
//! inherited descriptor.

/// Closes the descriptors above 2 this process inherited (listed in
/// `/proc/self/fd` on Linux; elsewhere, nothing is closed). Must run
/// before anything in the process opens a descriptor of its own.
pub(super) fn close_inherited_fds() {
    #[cfg(target_os = "linux")]
    {
        let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
            return;
        };
        let listed: Vec<i32> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .filter(|fd| *fd > 2)
            .collect();
        for fd in listed {
            // The listing's own descriptor is closed by now: skip it.
            if std::fs::read_link(format!("/proc/self/fd/{fd}")).is_err() {
                continue;
            }
            // SAFETY: an open descriptor this process inherited: nothing in
            // it owns or uses it (nothing has opened a file yet), and it is
            // closed once.
            unsafe { rustix::io::close(fd) };
        }
    }
}

/// Limits this process's address space to `megabytes` (RLIMIT_AS): an
/// allocation past it fails, and a Rust plugin aborts on it.
pub(super) fn limit_memory(megabytes: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, setrlimit};
        let bytes = megabytes.saturating_mul(1 << 20);
        setrlimit(
            Resource::As,
            Rlimit {
                current: Some(bytes),
                maximum: Some(bytes),
            },
        )
        .map_err(std::io::Error::from)
    }
    #[cfg(not(unix))]
    {
        let _ = megabytes;
        Err(std::io::Error::other(
            "plugin_host.memory_limit_mb is only enforced on Unix",
        ))
    }
}

/// How often a worker looks whether its host is still its parent.
const PARENT_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Ends this process (SIGKILL) once its parent is no longer the process
/// `host_pid` names (the host sets it in `LOOPGUARD_PLUGIN_HOST_PID`): a
/// host that dies, however, takes its workers with it, even one stuck in
/// a plugin call that would never read the closed pipe. Without a
/// readable `host_pid`, or off Unix, nothing is watched (a worker still
/// ends when its stdin closes, between calls).
pub(super) fn watch_parent(host_pid: Option<&str>) {
    #[cfg(unix)]
    {
        let Some(host) = host_pid.and_then(|pid| pid.trim().parse::<i32>().ok()) else {
            return;
        };
        let parent_is_host = move || {
            rustix::process::getppid().is_some_and(|parent| parent.as_raw_nonzero().get() == host)
        };
        if !parent_is_host() {
            // Orphaned before the watch began: nobody reads our answers.
            exit_now();
        }
        let watcher = std::thread::Builder::new()
            .name("loopguard-parent-watch".to_owned())
            .spawn(move || {
                loop {
                    std::thread::sleep(PARENT_POLL);
                    if !parent_is_host() {
                        exit_now();
                    }
                }
            });
        if let Err(err) = watcher {
            tracing::warn!(%err, "plugin worker: cannot watch its host; it ends when its pipe closes");
        }
    }
    #[cfg(not(unix))]
    {
        let _ = host_pid;
    }
}

/// Kills this process at once: no destructors, no exit handlers (a hung
/// plugin thread may hold any lock they would need).
#[cfg(unix)]
fn exit_now() -> ! {
    use rustix::process::{Signal, getpid, kill_process};
    let _ = kill_process(getpid(), Signal::KILL);
    // SIGKILL cannot be caught; should it not have been sent, abort.
    std::process::abort()
}
