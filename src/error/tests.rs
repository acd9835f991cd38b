use super::*;

/// A server's error answer about model `m` of `h:1` (for the crate's unit tests).
pub(crate) fn server(code: Code, http: Option<u16>, message: &str) -> Error {
    Error::Server {
        server: None,
        url: "h:1".into(),
        code,
        http,
        model: Some("m".into()),
        message: message.into(),
    }
}

/// [`server`]'s "boom", about `model`.
fn boom(code: Code, http: Option<u16>, model: Option<&str>) -> Error {
    let mut e = server(code, http, "boom");
    if let Error::Server { model: m, .. } = &mut e {
        *m = model.map(str::to_string);
    }
    e
}

/// The sentences are rendered from the values, as they always read.
#[test]
fn server_errors_render_their_status() {
    let cases = [
        (
            boom(Code::Internal, None, None),
            "Triton at h:1 answered Internal: boom",
        ),
        (
            boom(Code::Internal, None, Some("m")),
            "Triton at h:1 answered Internal for model \"m\": boom",
        ),
        (
            boom(Code::ResourceExhausted, Some(429), None),
            "Triton at h:1 answered ResourceExhausted (HTTP 429): boom",
        ),
        (
            boom(Code::Internal, Some(500), Some("m")),
            "Triton at h:1 answered Internal (HTTP 500) for model \"m\": boom",
        ),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
        assert_eq!(e.server_message(), Some("boom"));
    }
    let e = Error::InvalidAnswer {
        server: None,
        url: "h:1".into(),
        answer: AnswerTo::Call { path: "/v2".into() },
        message: "expected value".into(),
    };
    assert_eq!(
        e.to_string(),
        "Triton at h:1 answered an answer to /v2 that is not the JSON expected: expected value"
    );
    let e = Error::InvalidAnswer {
        server: None,
        url: "h:1".into(),
        answer: AnswerTo::Inference { model: "m".into() },
        message: "short".into(),
    };
    assert_eq!(
        e.to_string(),
        "Triton at h:1 answered an inference answer for model \"m\" that cannot be read: short"
    );
    assert_eq!(
        e.server_message(),
        None,
        "bertqa's reading, not the server's words"
    );
}

#[test]
fn codes_have_proto_names() {
    assert_eq!(Code::ResourceExhausted.as_str(), "RESOURCE_EXHAUSTED");
    assert_eq!(Code::Unauthenticated.as_str(), "UNAUTHENTICATED");
    assert_eq!(Code::DeadlineExceeded.to_string(), "DeadlineExceeded");
}

#[test]
fn only_the_servers_words_are_its_message() {
    let answered = Error::unavailable("h:1", Unreachable::Answered, "HTTP 503: busy");
    assert_eq!(answered.server_message(), Some("HTTP 503: busy"));
    for cause in [
        Unreachable::Closed,
        Unreachable::Refused,
        Unreachable::NotReady,
    ] {
        let e = Error::unavailable("h:1", cause, "shared memory region not found");
        assert_eq!(e.server_message(), None, "{cause:?}");
        assert_eq!(
            e.to_string(),
            "cannot reach Triton at h:1: shared memory region not found"
        );
    }
    let exhausted = Error::RetriesExhausted {
        attempts: 2,
        retries: 1,
        codes: BTreeMap::from([("UNAVAILABLE", 1), ("DEADLINE_EXCEEDED", 1)]),
        last: Box::new(boom(Code::Internal, None, None)),
    };
    assert_eq!(exhausted.server_message(), None);
}

#[test]
fn run_failures_say_what_happened() {
    let e = Error::RetriesExhausted {
        attempts: 4,
        retries: 3,
        codes: BTreeMap::from([("UNAVAILABLE", 3), ("DEADLINE_EXCEEDED", 1)]),
        last: Box::new(Error::Timeout {
            url: "h:1".into(),
            timeout_ms: 5,
        }),
    };
    assert_eq!(
        e.to_string(),
        "a request failed 4 times (DEADLINE_EXCEEDED ×1, UNAVAILABLE ×3; `retries` 3 \
             spent); last error: request to h:1 timed out after 5 ms"
    );
    let e = Error::NotDecoded {
        qas_id: "q1".into(),
    };
    assert_eq!(
        e.to_string(),
        "question \"q1\" was not decoded (its windows were not all answered)"
    );
    let e = Error::MissingParagraph {
        qas_id: "q1".into(),
        paragraph: 3,
        paragraphs: 2,
    };
    assert_eq!(e.to_string(), "question \"q1\" refers to paragraph 3 of 2");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let joined = rt.block_on(async {
        let task = tokio::spawn(std::future::pending::<()>());
        task.abort();
        task.await.unwrap_err()
    });
    let e = Error::task_failed("inference task", &joined);
    assert!(
        matches!(
            e,
            Error::TaskFailed {
                panicked: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("internal error: inference task failed: task "),
        "{e}"
    );
}
