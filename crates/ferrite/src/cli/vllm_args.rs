//! The flags of `vllm serve` that scripts pass, under vLLM's names: each either does what it does
//! in vLLM, or is accepted as a no-op whose help says why it has no effect, or is refused at
//! start with what ferrite does instead (docs/api.md, "vLLM's command line"). Each is listed in
//! `--help` under its topic's heading, beside ferrite's own flags of that topic.

use clap::{Args, ValueEnum};

use super::{heading, Device};

#[derive(Debug, Args)]
pub struct VllmArgs {
    /// Replace the model's chat template: a file (Jinja) or the template itself inline (vLLM's
    /// flag), e.g. to fix a GGUF whose embedded template is broken.
    #[arg(long, value_name = "FILE|TEMPLATE", help_heading = heading::MODEL)]
    pub chat_template: Option<String>,
    /// Let a chat request carry its own template (`chat_template` in the body, vLLM's flag of
    /// the same name). Off by default, as in vLLM: a template is a program the server runs,
    /// and without this flag such a request is refused with a 400.
    #[arg(long, help_heading = heading::API)]
    pub trust_request_chat_template: bool,
    /// The seed of requests that send none (vLLM's `--seed`). vLLM seeds one random generator
    /// that unseeded requests share, so their draws depend on what ran before; ferrite has no
    /// such shared generator, so each unseeded request samples as if it sent `seed: N`
    /// (repeating a request repeats its answer). [default: a fresh random stream per request]
    #[arg(long, value_name = "N", help_heading = heading::API)]
    pub seed: Option<u64>,
    /// The precision the model computes in (vLLM's names): `auto` is what the device runs:
    /// float32 on the CPU (weights stay in their file type and are widened in the kernels),
    /// bfloat16 on CUDA (float32 residual stream). Naming the device's own type is accepted;
    /// any other is refused at start, since ferrite has no other compute path.
    #[arg(long, value_enum, default_value_t = DtypeArg::Auto, help_heading = heading::ENGINE)]
    pub dtype: DtypeArg,
    /// Share KV pages of common prompt prefixes between requests: already the default (vLLM's
    /// flag; `--no-enable-prefix-caching` turns it off).
    #[arg(long, conflicts_with_all = ["no_enable_prefix_caching", "no_prefix_caching"], help_heading = heading::MEMORY)]
    pub enable_prefix_caching: bool,
    /// Do not share KV pages between requests (vLLM's name for `--no-prefix-caching`).
    #[arg(long, help_heading = heading::MEMORY)]
    pub no_enable_prefix_caching: bool,
    /// Origins a browser may call the API from (CORS): a JSON list as vLLM takes it
    /// ('["https://app.example"]', '["*"]') or comma-separated. Unlike vLLM, whose default is
    /// every origin, CORS is off until this is given: a server on localhost would otherwise
    /// answer any web page the user opens. [default: none]
    #[arg(long, value_name = "LIST", help_heading = heading::API)]
    pub allowed_origins: Option<String>,
    /// Methods a cross-origin request may use (CORS; with --allowed-origins) [default: *].
    #[arg(long, value_name = "LIST", help_heading = heading::API)]
    pub allowed_methods: Option<String>,
    /// Headers a cross-origin request may send (CORS; with --allowed-origins) [default: *].
    #[arg(long, value_name = "LIST", help_heading = heading::API)]
    pub allowed_headers: Option<String>,
    /// Let cross-origin requests carry credentials (CORS `Access-Control-Allow-Credentials`;
    /// with --allowed-origins). A wildcard is then answered with the request's own origin, as
    /// browsers refuse `*` with credentials.
    #[arg(long, help_heading = heading::API)]
    pub allow_credentials: bool,
    /// Accepted, no effect: ferrite always lets the model choose tools (`tool_choice: "auto"`,
    /// the default when a request has tools) whenever a tool-call parser is known
    /// (--tool-call-parser, or detected from the chat template).
    #[arg(long, help_heading = heading::API)]
    pub enable_auto_tool_choice: bool,
    /// No log line per request (finished or rejected); the metrics still count them.
    #[arg(long, help_heading = heading::OPERATIONS)]
    pub disable_log_requests: bool,
    /// GPUs to split the model across: only 1 is accepted, ferrite runs a model on one device
    /// (run a replica per GPU behind a load balancer instead).
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = heading::ENGINE)]
    pub tensor_parallel_size: usize,
    /// Accepted, no effect: it lets vLLM run Python code from the model's repository, and
    /// ferrite never runs model code (it implements each architecture itself; a model that
    /// needs custom code is refused at load as an unsupported architecture).
    #[arg(long, help_heading = heading::MODEL)]
    pub trust_remote_code: bool,
}

/// vLLM's `--dtype` values (with its aliases `half` and `float`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DtypeArg {
    Auto,
    #[value(name = "bfloat16")]
    Bfloat16,
    #[value(name = "float16", alias = "half")]
    Float16,
    #[value(name = "float32", alias = "float")]
    Float32,
}

impl VllmArgs {
    /// The flags that cannot be honoured on `device`, refused before anything loads.
    pub fn check(&self, device: Device) -> anyhow::Result<()> {
        if self.tensor_parallel_size != 1 {
            anyhow::bail!(
                "--tensor-parallel-size {}: ferrite runs a model on one GPU; for more throughput \
                 run one server per GPU behind a load balancer (docs/deploy.md)",
                self.tensor_parallel_size
            );
        }
        let runs = match device {
            Device::Cpu => DtypeArg::Float32,
            Device::Cuda => DtypeArg::Bfloat16,
        };
        if self.dtype != DtypeArg::Auto && self.dtype != runs {
            anyhow::bail!(
                "--dtype {}: --device {} computes in {} only; pass --dtype auto or {}",
                name(self.dtype),
                device_name(device),
                name(runs),
                name(runs)
            );
        }
        Ok(())
    }

    /// The CORS lists as given, or `None` when CORS is off.
    pub fn cors(&self) -> anyhow::Result<Option<ferrite_server::CorsConfig>> {
        let Some(origins) = &self.allowed_origins else {
            return Ok(None);
        };
        let list = |flag: &str, value: Option<&String>| -> anyhow::Result<Vec<String>> {
            value.map_or(Ok(vec!["*".to_string()]), |v| parse_list(flag, v))
        };
        Ok(Some(ferrite_server::CorsConfig {
            origins: parse_list("--allowed-origins", origins)?,
            methods: list("--allowed-methods", self.allowed_methods.as_ref())?,
            headers: list("--allowed-headers", self.allowed_headers.as_ref())?,
            credentials: self.allow_credentials,
        }))
    }
}

fn name(d: DtypeArg) -> &'static str {
    match d {
        DtypeArg::Auto => "auto",
        DtypeArg::Bfloat16 => "bfloat16",
        DtypeArg::Float16 => "float16",
        DtypeArg::Float32 => "float32",
    }
}

fn device_name(d: Device) -> &'static str {
    match d {
        Device::Cpu => "cpu",
        Device::Cuda => "cuda",
    }
}

/// A JSON list of strings (vLLM's form) or comma-separated values.
fn parse_list(flag: &str, value: &str) -> anyhow::Result<Vec<String>> {
    let trimmed = value.trim();
    let items: Vec<String> = if trimmed.starts_with('[') {
        serde_json::from_str(trimmed)
            .map_err(|e| anyhow::anyhow!("{flag}: not a JSON list of strings: {e}"))?
    } else {
        trimmed.split(',').map(|s| s.trim().to_string()).collect()
    };
    let items: Vec<String> = items.into_iter().filter(|s| !s.is_empty()).collect();
    if items.is_empty() {
        anyhow::bail!("{flag}: the list is empty");
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_as_json_or_commas() {
        let json = parse_list("f", r#"["http://a", "http://b"]"#).unwrap();
        assert_eq!(json, ["http://a", "http://b"]);
        assert_eq!(parse_list("f", "GET, POST").unwrap(), ["GET", "POST"]);
        assert!(parse_list("f", "[1]").is_err());
        assert!(parse_list("f", " , ").is_err());
    }
}
