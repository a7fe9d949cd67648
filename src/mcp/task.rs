//! MCP tasks as the 2025-11-25 protocol revision has them (SEP-1686): a
//! `tools/call` with a `task` parameter makes the server answer at once
//! with a task id; the client polls `tasks/get` (its status message is
//! shown as progress) and fetches the tool's result with `tasks/result`
//! (which also carries the server's requests for input while the task
//! waits for them). rmcp speaks a later revision of tasks (SEP-2663), so
//! these requests go out as custom requests and the answers are read as
//! JSON. Cancelling the call sends `tasks/cancel`.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
use rmcp::service::Peer;
use serde_json::{Value, json};

use super::client::{CallError, CallOutput, call_output};

/// How long the server keeps a finished task's result for us.
const TASK_TTL_MS: u64 = 300_000;

/// Poll interval bounds (the server suggests one).
const MIN_POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(5);

async fn request(peer: &Peer<RoleClient>, method: &str, params: Value) -> Result<Value, CallError> {
    let failed = |error: String| CallError::Request {
        method: method.to_string(),
        error,
    };
    let result = peer
        .send_request(ClientRequest::CustomRequest(CustomRequest::new(
            method,
            Some(params),
        )))
        .await
        .map_err(|e| failed(e.to_string()))?;
    match result {
        ServerResult::CustomResult(v) => Ok(v.0),
        other => serde_json::to_value(&other).map_err(|e| failed(e.to_string())),
    }
}

/// The task object of an answer: under `task` (CreateTaskResult) or the
/// answer itself (`tasks/get`).
fn task_of(v: &Value) -> &Value {
    v.get("task").unwrap_or(v)
}

/// Sends `tasks/cancel` for a task whose call was dropped before it ended.
struct CancelTask {
    peer: Peer<RoleClient>,
    id: Option<String>,
}

impl Drop for CancelTask {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        rt.spawn(async move {
            let _ = request(&peer, "tasks/cancel", json!({"taskId": id})).await;
        });
    }
}

/// Runs `tool` as a task and waits for its result, reporting the task's
/// status messages through `progress`.
pub(super) async fn call_as_task(
    peer: &Peer<RoleClient>,
    tool: &str,
    input: Value,
    progress: Option<&crate::tools::ProgressFn>,
) -> Result<CallOutput, CallError> {
    let created = request(
        peer,
        "tools/call",
        json!({"name": tool, "arguments": input, "task": {"ttl": TASK_TTL_MS}}),
    )
    .await?;
    let Some(id) = task_of(&created)
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return Err(CallError::NoTask(tool.to_string()));
    };
    let mut guard = CancelTask {
        peer: peer.clone(),
        id: Some(id.clone()),
    };
    let mut task = task_of(&created).clone();
    let mut last_message = String::new();
    loop {
        let status = task.get("status").and_then(Value::as_str).unwrap_or("");
        let message = task
            .get("statusMessage")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(report) = progress
            && !message.is_empty()
            && message != last_message
        {
            report(format!("{status}: {message}"));
            last_message = message.to_string();
        }
        match status {
            // `tasks/result` waits for the end and carries the server's
            // questions while the task needs input.
            "completed" | "input_required" => break,
            "failed" => {
                guard.id = None;
                return Err(CallError::TaskFailed(message.to_string()));
            }
            "cancelled" => {
                guard.id = None;
                return Err(CallError::TaskCancelled);
            }
            _ => {}
        }
        let poll = task
            .get("pollInterval")
            .and_then(Value::as_u64)
            .map_or(Duration::from_secs(1), Duration::from_millis)
            .clamp(MIN_POLL, MAX_POLL);
        tokio::time::sleep(poll).await;
        task = task_of(&request(peer, "tasks/get", json!({"taskId": id})).await?).clone();
    }
    let result = peer
        .send_request(ClientRequest::CustomRequest(CustomRequest::new(
            "tasks/result",
            Some(json!({"taskId": id})),
        )))
        .await
        .map_err(|e| CallError::Request {
            method: "tasks/result".into(),
            error: e.to_string(),
        })?;
    guard.id = None;
    match result {
        ServerResult::CallToolResult(r) => Ok(call_output(&r)),
        other => {
            let v = serde_json::to_value(&other).unwrap_or(Value::Null);
            match serde_json::from_value::<rmcp::model::CallToolResult>(v) {
                Ok(r) => Ok(call_output(&r)),
                Err(_) => Err(CallError::TaskResult),
            }
        }
    }
}
