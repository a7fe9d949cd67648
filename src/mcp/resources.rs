//! `ListMcpResources` and `ReadMcpResource`: the resources of the ready
//! shared servers that declare the `resources` capability, as two tools.
//! Their definitions are the specs in `agents/tools/`; a session gets them
//! only while such a server is ready (see `crate::runtime`).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use crate::tools::outcome::{CallCancelled, McpResourceError, McpResourceList, McpResult};
use crate::tools::{Tool, ToolContext, ToolOutput};

use super::McpManager;

pub const LIST_RESOURCES: &str = "ListMcpResources";
pub const READ_RESOURCE: &str = "ReadMcpResource";
/// Both resource tools.
pub const RESOURCE_TOOLS: [&str; 2] = [LIST_RESOURCES, READ_RESOURCE];

/// One of the two resource tools, over the manager's servers.
pub struct ResourceTool {
    name: &'static str,
    manager: Arc<McpManager>,
}

impl ResourceTool {
    /// The tool called `name`, if it is one of [`RESOURCE_TOOLS`].
    pub fn new(name: &str, manager: Arc<McpManager>) -> Option<ResourceTool> {
        let name = RESOURCE_TOOLS.into_iter().find(|n| *n == name)?;
        Some(ResourceTool { name, manager })
    }

    async fn list(&self, server: Option<&str>) -> ToolOutput {
        let servers = self.manager.resource_servers();
        if let Some(s) = server
            && !servers.iter().any(|(n, _)| n == s)
        {
            return unknown(s, &servers);
        }
        let mut resources = Vec::new();
        for (name, conn) in servers
            .iter()
            .filter(|(n, _)| server.is_none_or(|s| s == n))
        {
            match conn.list_resources().await {
                Ok(list) => resources.extend(list.into_iter().map(|mut r| {
                    r["server"] = json!(name);
                    r
                })),
                Err(e) => {
                    return ToolOutput::error(McpResourceError {
                        unknown: false,
                        server: name.clone(),
                        servers: String::new(),
                        uri: None,
                        error: Some(e.to_string()),
                    });
                }
            }
        }
        ToolOutput::ok(McpResourceList {
            resources,
            server: server.map(str::to_string),
        })
    }

    async fn read(&self, server: &str, uri: &str) -> ToolOutput {
        let servers = self.manager.resource_servers();
        let Some((_, conn)) = servers.iter().find(|(n, _)| n == server) else {
            return unknown(server, &servers);
        };
        match conn.read_resource(uri).await {
            Ok(r) => {
                let mut out = ToolOutput::ok(McpResult { parts: r.parts });
                out.images = r.images;
                out
            }
            Err(e) => ToolOutput::error(McpResourceError {
                unknown: false,
                server: server.to_string(),
                servers: String::new(),
                uri: Some(uri.to_string()),
                error: Some(e.to_string()),
            }),
        }
    }
}

fn unknown(server: &str, servers: &[(String, Arc<super::Connection>)]) -> ToolOutput {
    let names: Vec<&str> = servers.iter().map(|(n, _)| n.as_str()).collect();
    ToolOutput::error(McpResourceError {
        unknown: true,
        server: server.to_string(),
        servers: names.join(", "),
        uri: None,
        error: None,
    })
}

impl Tool for ResourceTool {
    fn name(&self) -> &str {
        self.name
    }

    fn read_only(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let field = |k: &str| input.get(k).and_then(Value::as_str);
            let work = async {
                if self.name == LIST_RESOURCES {
                    self.list(field("server")).await
                } else {
                    // The schema requires both; validation ran before the call.
                    self.read(field("server").unwrap_or(""), field("uri").unwrap_or(""))
                        .await
                }
            };
            tokio::select! {
                out = work => out,
                () = ctx.cancel.cancelled() => ToolOutput::error(CallCancelled {}),
            }
        })
    }
}
