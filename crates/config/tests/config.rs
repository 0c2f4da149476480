//! Reading, defaults and validation of every section, and where an error
//! is placed.

use std::io;
use std::path::Path;

use loopguard_config::*;

#[test]
fn default_toml_matches_the_built_in_defaults() {
    let parsed = Config::from_toml_str(DEFAULT_CONFIG_TOML).expect("default.toml is valid");
    assert_eq!(parsed, Config::default());
}

#[test]
fn the_repositorys_config_default_toml_is_this_crates_byte_for_byte() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !workspace.join("config").is_dir() {
        // A packaged crate, away from the repository.
        return;
    }
    let copy = workspace.join("config/default.toml");
    let copied = std::fs::read(&copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
    assert!(
        copied == DEFAULT_CONFIG_TOML.as_bytes(),
        "config/default.toml differs from crates/config/default.toml: edit the \
         second, then copy it over the first"
    );
}

#[test]
fn defaults_follow_the_spec_table() {
    let config = Config::default();
    assert_eq!(config.gate.loops_before_gate, 3);
    assert_eq!(config.similarity.request_threshold, 0.85);
    assert_eq!(config.similarity.topic_threshold, 0.85);
    assert_eq!(config.cycles.max_exchanges, 3);
    assert_eq!(config.cycles.window_secs, 600);
    assert_eq!(
        (
            config.cycles.severity_medium,
            config.cycles.severity_high,
            config.cycles.severity_critical
        ),
        (5, 8, 12)
    );
    assert_eq!(config.edges.max_loop_edge, 5);
    assert_eq!(config.phases.max_visits, 10);
    assert_eq!(config.phases.max_transitions, 5);
    assert_eq!(config.oscillation.cycle_detection_length, 3);
    assert_eq!(config.entropy.threshold, 3);
    assert_eq!(config.entropy.max_pivots, 2);
    assert_eq!(config.failures.history, 10);
    assert_eq!(config.engine.task_ttl_secs, 86_400);
    assert_eq!(config.limits.max_line_bytes, 1_048_576);
    assert_eq!(config.limits.max_task_id_bytes, 1024);
    assert_eq!(config.limits.max_text_bytes, 8192);
}

#[test]
fn the_tuned_encoder_is_named_or_switched_and_a_wrong_name_names_the_key() {
    let read = |value: &str| {
        Config::from_toml_str(&format!("[similarity]\ntuned_encoder = {value}\n"))
            .map(|config| config.similarity.tuned_encoder)
    };
    assert_eq!(read("true").ok(), Some(TunedEncoder::MiniLm));
    assert_eq!(read("false").ok(), Some(TunedEncoder::Off));
    assert_eq!(read("\"minilm\"").ok(), Some(TunedEncoder::MiniLm));
    assert_eq!(read("\"mpnet\"").ok(), Some(TunedEncoder::Mpnet));
    let err = read("\"bert\"").expect_err("not an encoder");
    assert_eq!(err.key(), Some("similarity.tuned_encoder"), "{err}");
    assert!(err.to_string().contains("\"mpnet\""), "{err}");
    assert!(read("3").is_err());
    // Written back as it was read: true/false, or the name.
    for encoder in [TunedEncoder::Off, TunedEncoder::MiniLm, TunedEncoder::Mpnet] {
        let mut config = Config::default();
        config.similarity.tuned_encoder = encoder;
        let text = toml::to_string(&config).expect("serializes");
        let back = Config::from_toml_str(&text).expect("reads back");
        assert_eq!(back.similarity.tuned_encoder, encoder, "{text}");
    }
    for name in ["true", "minilm", "mpnet", "false"] {
        let parsed: TunedEncoder = name.parse().expect(name);
        assert_eq!(parsed.is_on(), name != "false");
    }
    assert!("bert".parse::<TunedEncoder>().is_err());
}

#[test]
fn limits_are_validated_by_key() {
    let config = Config::from_toml_str("[limits]\nmax_text_bytes = 20000\n").expect("valid");
    assert_eq!(config.limits.max_text_bytes, 20_000);
    assert_eq!(config.limits.max_line_bytes, 1_048_576);
    let err = Config::from_toml_str("[limits]\nmax_line_byte = 4\n").expect_err("typo");
    assert_eq!(err.key(), Some("limits.max_line_byte"));
    for (text, key) in [
        ("[limits]\nmax_line_bytes = 10\n", "limits.max_line_bytes"),
        (
            "[limits]\nmax_task_id_bytes = 0\n",
            "limits.max_task_id_bytes",
        ),
        ("[limits]\nmax_text_bytes = 4095\n", "limits.max_text_bytes"),
    ] {
        let err = Config::from_toml_str(text).expect_err(text);
        assert_eq!(err.key(), Some(key), "{err}");
        assert!(err.to_string().starts_with("config:2:1: "), "{err}");
    }
    assert!(Config::from_toml_str("[limits]\nmax_text_bytes = 4096\n").is_ok());
}

#[test]
fn unknown_key_is_named() {
    let err = Config::from_toml_str("[phases]\nmax_visit = 4\n").expect_err("typo");
    assert!(err.to_string().contains("max_visit"), "{err}");
    let err = Config::from_toml_str("[phase]\nmax_visits = 4\n").expect_err("typo");
    assert!(err.to_string().contains("phase"), "{err}");
}

#[test]
fn bad_value_names_key_and_value() {
    let err = Config::from_toml_str("[cycles]\nwindow_secs = 0\n").expect_err("zero");
    assert_eq!(
        err.to_string(),
        "config:2:1: `cycles.window_secs` = 0 is not valid: must be at least 1"
    );
    let err =
        Config::from_toml_str("[similarity]\nrequest_threshold = 1.5\n").expect_err("out of range");
    assert!(
        err.to_string().contains("similarity.request_threshold") && err.to_string().contains("1.5"),
        "{err}"
    );
    let err = Config::from_toml_str("[edges.overrides]\n\"planner\" = 3\n").expect_err("key");
    assert!(err.to_string().contains("planner"), "{err}");
}

/// The location, key and message of a config error, for exact checks.
fn parts(err: &ConfigError) -> (Option<&Path>, Option<(usize, usize)>, Option<&str>) {
    let location = err.location().expect("a located error");
    (
        location.file.as_deref(),
        location
            .position
            .map(|position| (position.line, position.column)),
        err.key(),
    )
}

#[test]
fn a_syntax_error_has_a_position_and_no_key() {
    let err = Config::from_toml_str("[cycles]\nwindow_secs = = 3\n").expect_err("syntax");
    assert_eq!(parts(&err), (None, Some((2, 15)), None));
    let ConfigError::Parse { message, .. } = &err else {
        panic!("a parse error: {err:?}");
    };
    assert!(!message.is_empty() && !message.contains('\n'), "{message}");
    assert_eq!(err.to_string(), format!("config:2:15: {message}"));
}

#[test]
fn an_unknown_key_in_a_nested_table_is_named_with_its_table() {
    let err = Config::from_toml_str("[gate]\nloops_before_gate = 2\n\n[cycles]\nwindow_sec = 3\n")
        .expect_err("typo");
    assert_eq!(parts(&err), (None, Some((5, 1)), Some("cycles.window_sec")));
    assert!(
        err.to_string()
            .starts_with("config:5:1: `cycles.window_sec`: unknown field `window_sec`"),
        "{err}"
    );
    // The same key written dotted, in an inline table, under a nested
    // header, in the second of an array of tables, quoted: each names
    // the key the way the document reaches it.
    for (toml, position, key) in [
        ("cycles.window_sec = 3\n", (1, 8), "cycles.window_sec"),
        (
            "cycles = { window_sec = 3 }\n",
            (1, 12),
            "cycles.window_sec",
        ),
        (
            "[similarity.task_types.research]\nrequest_treshold = 0.8\n",
            (2, 1),
            "similarity.task_types.research.request_treshold",
        ),
        (
            "[[plugins]]\npath = \"a.so\"\n[[plugins]]\npath = \"b.so\"\nconfg = {}\n",
            (5, 1),
            "plugins[1].confg",
        ),
        (
            "[cycles]\n\"window secs\" = 3\n",
            (2, 1),
            "cycles.\"window secs\"",
        ),
        (
            "# \u{e9}t\u{e9}\n[cycles]\n  window_sec = 3\n",
            (3, 3),
            "cycles.window_sec",
        ),
    ] {
        let err = Config::from_toml_str(toml).expect_err(toml);
        assert_eq!(parts(&err), (None, Some(position), Some(key)), "{toml}");
    }
}

#[test]
fn an_unknown_table_is_named_at_its_header() {
    let err = Config::from_toml_str("# limits\n[phase]\nmax_visits = 4\n").expect_err("typo");
    assert_eq!(parts(&err), (None, Some((2, 2)), Some("phase")));
    assert!(
        err.to_string()
            .starts_with("config:2:2: `phase`: unknown field `phase`"),
        "{err}"
    );
}

#[test]
fn a_value_of_the_wrong_type_is_named_at_the_value() {
    let err = Config::from_toml_str("[cycles]\nwindow_secs = \"ten\"\n").expect_err("type");
    assert_eq!(
        parts(&err),
        (None, Some((2, 15)), Some("cycles.window_secs"))
    );
}

#[test]
fn an_invalid_value_is_placed_at_its_key() {
    let err = Config::from_toml_str("[gate]\nloops_before_gate = 2\n[cycles]\n  window_secs = 0\n")
        .expect_err("zero");
    assert_eq!(
        parts(&err),
        (None, Some((4, 3)), Some("cycles.window_secs"))
    );
    let ConfigError::Invalid {
        key,
        value,
        reason,
        location,
    } = &err
    else {
        panic!("an invalid value: {err:?}");
    };
    assert_eq!(
        (key.as_str(), value.as_str(), reason.as_str()),
        ("cycles.window_secs", "0", "must be at least 1")
    );
    assert_eq!(location.file, None);
    assert_eq!(location.position, Some(TextPosition { line: 4, column: 3 }));
    // Quoted keys, array elements and task types are found too.
    for (toml, position, key) in [
        (
            "[edges.overrides]\n\"planner\" = 3\n",
            (2, 1),
            "edges.overrides.\"planner\"",
        ),
        (
            "[[plugins]]\npath = \"a.so\"\n\n[[plugins]]\npath = \"\"\n",
            (5, 1),
            "plugins[1].path",
        ),
        (
            "[similarity.task_types.x]\ntopic_threshold = 2.0\n",
            (2, 1),
            "similarity.task_types.x.topic_threshold",
        ),
    ] {
        let err = Config::from_toml_str(toml).expect_err(toml);
        assert_eq!(parts(&err), (None, Some(position), Some(key)), "{toml}");
    }
    // A key left at its default is placed at its table's header.
    let err = Config::from_toml_str("\n[cycles]\nmax_exchanges = 5\n").expect_err("medium");
    assert_eq!(
        parts(&err),
        (None, Some((2, 2)), Some("cycles.severity_medium"))
    );
    // A config that was never text has no position.
    let mut config = Config::default();
    config.cycles.window_secs = 0;
    let err = config.validate().expect_err("zero");
    assert_eq!(parts(&err), (None, None, Some("cycles.window_secs")));
    assert_eq!(
        err.to_string(),
        "config: `cycles.window_secs` = 0 is not valid: must be at least 1"
    );
}

#[test]
fn serve_keys_are_checked_like_the_others() {
    let config =
        Config::from_toml_str("[serve]\ntoken = \"t\"\nqueue = 2\n").expect("a valid [serve]");
    assert_eq!(config.serve.token.as_deref(), Some("t"));
    assert_eq!(config.serve.queue, 2);
    assert_eq!(config.serve.body_limit_bytes, 1024 * 1024);
    for (text, key) in [
        ("[serve]\ntokn = \"t\"\n", "tokn"),
        ("[serve]\nlisten = \"localhost\"\n", "serve.listen"),
        ("[serve]\nqueue = 0\n", "serve.queue"),
        ("[serve]\nbody_limit_bytes = 1\n", "serve.body_limit_bytes"),
        ("[serve]\ntoken = \"\"\n", "serve.token"),
        ("[serve]\nwebhook_url = \"ftp://x\"\n", "serve.webhook_url"),
        ("[serve]\nwebhook_attempts = 0\n", "serve.webhook_attempts"),
        (
            "[serve]\nwebhook_timeout_ms = 0\n",
            "serve.webhook_timeout_ms",
        ),
        ("[serve]\nwebhook_queue = 0\n", "serve.webhook_queue"),
        ("[serve]\notlp_flush_ms = 0\n", "serve.otlp_flush_ms"),
        (
            "[serve]\nheader_timeout_ms = 0\n",
            "serve.header_timeout_ms",
        ),
        ("[serve]\nbody_timeout_ms = 0\n", "serve.body_timeout_ms"),
        ("[serve]\nmax_connections = 0\n", "serve.max_connections"),
        (
            "[serve]\nmax_header_bytes = 100\n",
            "serve.max_header_bytes",
        ),
        (
            "[serve]\nshutdown_grace_ms = 0\n",
            "serve.shutdown_grace_ms",
        ),
        ("[serve]\notlp_max_traces = 0\n", "serve.otlp_max_traces"),
        (
            "[serve]\notlp_max_spans_per_trace = 0\n",
            "serve.otlp_max_spans_per_trace",
        ),
    ] {
        let err = Config::from_toml_str(text).expect_err(text);
        assert!(err.to_string().contains(key), "{text}: {err}");
    }
}

#[test]
fn a_file_is_named_in_its_errors() {
    let dir = std::env::temp_dir().join(format!("loopguard-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("loopguard.toml");
    std::fs::write(&path, "[cycles]\nwindow_secs = 0\n").expect("written");
    let err = Config::from_file(&path).expect_err("zero");
    assert_eq!(
        parts(&err),
        (
            Some(path.as_path()),
            Some((2, 1)),
            Some("cycles.window_secs")
        )
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}:2:1: `cycles.window_secs` = 0 is not valid: must be at least 1",
            path.display()
        )
    );
    std::fs::write(&path, "[cycles]\nwindow_sec = 3\n").expect("written");
    let err = Config::from_file(&path).expect_err("typo");
    assert_eq!(
        parts(&err),
        (
            Some(path.as_path()),
            Some((2, 1)),
            Some("cycles.window_sec")
        )
    );
    std::fs::write(&path, "[cycles]\nwindow_secs = 30\n").expect("written");
    assert_eq!(
        Config::from_file(&path).map(|config| config.cycles.window_secs),
        Ok(30)
    );
    let missing = dir.join("missing.toml");
    let err = Config::from_file(&missing).expect_err("missing");
    assert!(
        matches!(&err, ConfigError::Read { path, source }
            if *path == missing && source.kind() == io::ErrorKind::NotFound),
        "{err:?}"
    );
    assert_eq!(err.location(), None);
    assert_eq!(
        err.to_string(),
        format!("cannot read the config {}", missing.display())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn positions_count_lines_and_characters_from_one() {
    let text = "a\n\u{e9}\u{e9}x\n";
    let at = |offset| {
        let position = TextPosition::of_offset(text, offset);
        (position.line, position.column)
    };
    assert_eq!(at(0), (1, 1));
    assert_eq!(at(2), (2, 1));
    assert_eq!(at(6), (2, 3), "x, after two two-byte characters");
    assert_eq!(at(3), (2, 1), "inside a character: at that character");
    assert_eq!(at(100), (3, 1), "past the end: just after it");
}

#[test]
fn overrides_apply_per_phase_and_edge() {
    let config = Config::from_toml_str(
        "[phases.visit_overrides]\ntest = 5\n[edges.overrides]\n\"planner->researcher\" = 8\n",
    )
    .expect("valid");
    assert_eq!(config.phases.visit_limit_for("test"), 5);
    assert_eq!(config.phases.visit_limit_for("build"), 10);
    assert_eq!(config.edges.limit_for("planner", "researcher"), 8);
    assert_eq!(config.edges.limit_for("researcher", "planner"), 5);
}

#[test]
fn task_type_thresholds_override_and_name_their_key() {
    let config = Config::from_toml_str(
        "[similarity]\nrequest_threshold = 0.9\n[similarity.task_types.research]\nrequest_threshold = 0.8\n",
    )
    .expect("valid");
    let research = config.similarity.request_threshold_for(Some("research"));
    assert_eq!(research.value, 0.8);
    assert_eq!(
        research.key,
        "similarity.task_types.research.request_threshold"
    );
    let general = config.similarity.request_threshold_for(Some("coding"));
    assert_eq!(
        (general.value, general.key.as_str()),
        (0.9, "similarity.request_threshold")
    );
    let topic = config.similarity.topic_threshold_for(Some("research"));
    assert_eq!(
        (topic.value, topic.key.as_str()),
        (0.85, "similarity.topic_threshold")
    );
    let err = Config::from_toml_str("[similarity.task_types.x]\ntopic_threshold = 2.0\n")
        .expect_err("out of range");
    assert!(
        err.to_string()
            .contains("similarity.task_types.x.topic_threshold"),
        "{err}"
    );
}

#[test]
fn severity_critical_must_fit_in_a_window() {
    let err = Config::from_toml_str("[cycles]\nseverity_critical = 17\n").expect_err("17");
    assert_eq!(
        err.to_string(),
        "config:2:1: `cycles.severity_critical` = 17 is not valid: must be at most 16: windows \
         keep at most 16 exchanges per pair, cycle or topic, so a higher count is never \
         reached"
    );
    let config = Config::from_toml_str("[cycles]\nseverity_critical = 16\n").expect("16");
    assert_eq!(config.cycles.severity_critical, 16);
}

#[test]
fn progress_and_llm_defaults_and_validation() {
    let config = Config::default();
    assert_eq!(config.progress.no_progress_failures, 3);
    assert_eq!(config.progress.external_failures_before_escalation, 3);
    assert_eq!(config.llm.base_url, None);
    assert_eq!(config.llm.model, None);
    assert_eq!(config.llm.api_key_env, "LOOPGUARD_LLM_API_KEY");
    assert_eq!((config.llm.timeout_secs, config.llm.retries), (20, 2));

    let config =
        Config::from_toml_str("[llm]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"qwen\"\n")
            .expect("valid");
    assert_eq!(config.llm.model.as_deref(), Some("qwen"));
    for (toml, key) in [
        (
            "[progress]\nno_progress_failures = 0\n",
            "progress.no_progress_failures",
        ),
        (
            "[progress]\nexternal_failures_before_escalation = 0\n",
            "progress.external_failures_before_escalation",
        ),
        ("[llm]\nbase_url = \"localhost:8080\"\n", "llm.base_url"),
        ("[llm]\nmodel = \" \"\n", "llm.model"),
        ("[llm]\napi_key_env = \"\"\n", "llm.api_key_env"),
        ("[llm]\ntimeout_secs = 0\n", "llm.timeout_secs"),
        ("[llm]\nretries = 11\n", "llm.retries"),
        ("[llm]\nkey = \"sk-1\"\n", "key"),
    ] {
        let err = Config::from_toml_str(toml).expect_err(toml);
        assert!(err.to_string().contains(key), "{toml}: {err}");
    }
}

#[test]
fn plugins_are_tables_with_a_path_and_their_own_config() {
    let config = Config::from_toml_str(
        "[plugin_host]\nmax_faults = 5\n\n[[plugins]]\npath = \"a.so\"\n\n\
         [[plugins]]\npath = \"b.so\"\nconfig = { budget = 40, name = \"x\" }\n",
    )
    .expect("valid");
    assert_eq!(config.plugin_host.max_faults, 5);
    assert_eq!(config.plugin_host.max_concurrency, 4);
    assert_eq!(config.plugin_host.call_timeout_ms, 5000);
    assert_eq!(config.plugin_host.isolation, Isolation::Process);
    assert_eq!(config.plugins.len(), 2);
    let isolated = Config::from_toml_str(
        "[plugin_host]\nisolation = \"in-process\"\nmemory_limit_mb = 512\n\n\
         [[plugins]]\npath = \"a.so\"\n\n[[plugins]]\npath = \"b.so\"\nisolation = \"process\"\n",
    )
    .expect("valid");
    assert_eq!(isolated.plugin_host.memory_limit_mb, Some(512));
    assert_eq!(
        isolated
            .plugins
            .iter()
            .map(|plugin| plugin.isolation(&isolated.plugin_host))
            .collect::<Vec<_>>(),
        [Isolation::InProcess, Isolation::Process]
    );
    assert_eq!(config.plugins[0], PluginConfig::new("a.so"));
    assert_eq!(
        config.plugins[1].config,
        serde_json::json!({"budget": 40, "name": "x"})
    );
    for (toml, key) in [
        ("[plugin_host]\nmax_faults = 0\n", "plugin_host.max_faults"),
        (
            "[plugin_host]\nmax_concurrency = 0\n",
            "plugin_host.max_concurrency",
        ),
        (
            "[plugin_host]\ncall_timeout_ms = 0\n",
            "plugin_host.call_timeout_ms",
        ),
        ("[plugin_host]\nisolation = \"container\"\n", "isolation"),
        (
            "[[plugins]]\npath = \"a\"\nisolation = \"thread\"\n",
            "isolation",
        ),
        ("[plugin_host]\nworker = \"\"\n", "plugin_host.worker"),
        (
            "[plugin_host]\nmemory_limit_mb = 1\n",
            "plugin_host.memory_limit_mb",
        ),
        ("[[plugins]]\npath = \"\"\n", "plugins[0].path"),
        (
            "[[plugins]]\npath = \"a\"\nconfig = 3\n",
            "plugins[0].config",
        ),
        ("[[plugins]]\npath = \"a\"\nconfg = {}\n", "confg"),
        ("[[plugins]]\nconfig = {}\n", "path"),
    ] {
        let err = Config::from_toml_str(toml).expect_err(toml);
        assert!(err.to_string().contains(key), "{toml}: {err}");
    }
}

#[test]
fn cycle_severity_follows_ruling_4() {
    let cycles = CycleConfig::default();
    use loopguard_core_types::Severity::*;
    let got: Vec<_> = [4, 5, 7, 8, 11, 12, 30]
        .iter()
        .map(|n| cycles.severity(*n))
        .collect();
    assert_eq!(got, [Low, Medium, Medium, High, High, Critical, Critical]);
}

#[test]
fn the_judge_is_calibrated_by_default_and_its_threshold_is_chosen_per_task_type() {
    let config = Config::default();
    assert_eq!(config.similarity.judge, JudgeKind::Calibrated);
    assert_eq!(config.similarity.judge_threshold_for(Some("x")), None);
    let config = Config::from_toml_str(
        "[similarity]\njudge = \"cosine\"\njudge_threshold = 0.7\n\
         [similarity.task_types.research]\njudge_threshold = 0.6\n",
    )
    .expect("valid");
    assert_eq!(config.similarity.judge, JudgeKind::Cosine);
    let research = config
        .similarity
        .judge_threshold_for(Some("research"))
        .expect("set");
    assert_eq!(
        (research.value, research.key.as_str()),
        (0.6, "similarity.task_types.research.judge_threshold")
    );
    let general = config
        .similarity
        .judge_threshold_for(Some("coding"))
        .expect("set");
    assert_eq!(
        (general.value, general.key.as_str()),
        (0.7, "similarity.judge_threshold")
    );
    let err = Config::from_toml_str("[similarity]\njudge_threshold = 1.0\n")
        .expect_err("a score is below 1");
    assert!(
        err.to_string().contains("similarity.judge_threshold"),
        "{err}"
    );
    let err =
        Config::from_toml_str("[similarity]\njudge = \"jaccard\"\n").expect_err("an unknown judge");
    assert!(err.to_string().contains("similarity.judge"), "{err}");
}

#[test]
fn prices_match_exactly_then_by_the_longest_prefix_and_bad_ones_name_their_key() {
    let config = Config::from_toml_str(
        "[pricing.gpt]\ninput_per_mtok = 1.0\noutput_per_mtok = 1.0\n\
         [pricing.gpt-4o]\ninput_per_mtok = 2.5\noutput_per_mtok = 10.0\n\
         [pricing.\"gpt-4o-mini\"]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n",
    )
    .expect("valid");
    let input_price = |model: &str| config.pricing.price_for(model).map(|p| p.input_per_mtok);
    assert_eq!(input_price("gpt-4o-mini"), Some(0.15));
    assert_eq!(input_price("gpt-4o-2024-08-06"), Some(2.5));
    assert_eq!(input_price("gpt-3.5-turbo"), Some(1.0));
    assert_eq!(input_price("claude-3-5-haiku"), None);
    assert!(
        Config::default().pricing.models.is_empty(),
        "no prices built in"
    );

    let err =
        Config::from_toml_str("[pricing.\"x/y\"]\ninput_per_mtok = -1\noutput_per_mtok = 1\n")
            .expect_err("negative");
    assert_eq!(err.key(), Some("pricing.\"x/y\".input_per_mtok"));
    assert!(err.to_string().starts_with("config:2:1:"), "{err}");
    let err = Config::from_toml_str("[pricing.m]\ninput_per_mtok = 1\n").expect_err("half a price");
    assert!(err.to_string().contains("output_per_mtok"), "{err}");
}

#[test]
fn budgets_are_off_by_default_override_per_task_type_and_name_a_bad_limit() {
    assert!(!Config::default().budget.is_set());
    let config = Config::from_toml_str(
        "[budget]\nmax_tokens = 1000\nmax_cost_usd = 2.0\n\
         [budget.task_types.research]\nmax_cost_usd = 8.0\nmax_loop_cost_usd = 1.5\n",
    )
    .expect("valid");
    assert!(config.budget.is_set());
    let research = config.budget.limits_for(Some("research"));
    assert_eq!(
        (
            research.max_tokens,
            research.max_cost_usd,
            research.max_loop_cost_usd
        ),
        (Some(1000), Some(8.0), Some(1.5))
    );
    let other = config.budget.limits_for(Some("coding"));
    assert_eq!(
        (
            other.max_tokens,
            other.max_cost_usd,
            other.max_loop_cost_usd
        ),
        (Some(1000), Some(2.0), None)
    );

    for (toml, key) in [
        ("[budget]\nmax_tokens = 0\n", "budget.max_tokens"),
        ("[budget]\nmax_cost_usd = 0.0\n", "budget.max_cost_usd"),
        (
            "[budget.task_types.ops]\nmax_loop_cost_usd = -2.0\n",
            "budget.task_types.ops.max_loop_cost_usd",
        ),
    ] {
        let err = Config::from_toml_str(toml).expect_err(toml);
        assert_eq!(err.key(), Some(key), "{toml}");
        assert!(
            err.to_string().contains("leave it out for no limit"),
            "{err}"
        );
    }
    let err = Config::from_toml_str("[budget]\nmax_cost = 1.0\n").expect_err("unknown key");
    assert_eq!(err.key(), Some("budget.max_cost"));
}

#[test]
fn the_example_prices_read_and_name_their_date_and_source() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/pricing.example.toml");
    if !path.exists() {
        // A packaged crate, away from the repository.
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        text.contains("June 2025") && text.contains("Source:"),
        "dated, with a source"
    );
    let config = Config::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let mini = config
        .pricing
        .price_for("gpt-4o-mini-2024-07-18")
        .expect("priced");
    assert_eq!(mini.output_per_mtok, 0.60);
}
