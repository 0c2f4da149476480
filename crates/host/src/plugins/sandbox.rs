//! What a plugin's worker process (process isolation) does before it
//! loads the library: it closes every file descriptor it inherited but its
//! pipes (stdin, stdout, stderr), and, when `plugin_host.memory_limit_mb`
//! says, limits its address space, so that the operating system stops a
//! plugin that allocates without bound. The one `unsafe` call closes an
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
