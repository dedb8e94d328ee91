//! The opendal operator of a remote store: the service its URL names, configured from
//! [`StoreOptions`] and the environment, with an HTTP client of the store's own.

use std::time::Duration;

use opendal::Operator;

use super::options::{StoreKind, StoreOptions, bucket_and_root, env};
use crate::error::{Error, Result};
use crate::remote::Policy;

/// The operator of the remote store `url` (`rest`: the URL after its scheme).
pub(super) fn build_operator(
    kind: StoreKind,
    url: &str,
    rest: &str,
    options: &StoreOptions,
    policy: &Policy,
) -> Result<Operator> {
    use opendal::services;
    let op_err = |e: opendal::Error| Error::invalid(format!("cannot configure store {url:?}: {e}"));
    let operator = match kind {
        StoreKind::S3 => {
            let (bucket, root) = bucket_and_root(url, rest)?;
            let mut b = services::S3::default().bucket(bucket).root(&root);
            let region = options.region.clone().or_else(|| env("AWS_REGION")).or_else(|| env("AWS_DEFAULT_REGION"));
            b = b.region(region.as_deref().unwrap_or("us-east-1"));
            if let Some(ep) =
                options.endpoint.clone().or_else(|| env("AWS_ENDPOINT_URL_S3")).or_else(|| env("AWS_ENDPOINT_URL"))
            {
                b = b.endpoint(&ep);
            }
            if let (Some(k), Some(s)) = (&options.access_key_id, &options.secret_access_key) {
                b = b.access_key_id(k).secret_access_key(s);
            }
            if options.anonymous {
                b = b.skip_signature().disable_ec2_metadata();
            }
            Operator::new(b).map_err(op_err)?
        }
        StoreKind::Gcs => {
            let (bucket, root) = bucket_and_root(url, rest)?;
            let mut b = services::Gcs::default().bucket(bucket).root(&root);
            if let Some(ep) = &options.endpoint {
                b = b.endpoint(ep);
            }
            if let Some(path) = env("GOOGLE_APPLICATION_CREDENTIALS") {
                b = b.credential_path(&path);
            }
            if options.anonymous {
                b = b.skip_signature().disable_vm_metadata();
            }
            Operator::new(b).map_err(op_err)?
        }
        StoreKind::Azure => {
            let (container, root) = bucket_and_root(url, rest)?;
            let mut b = services::Azblob::default().container(container).root(&root);
            let account = options.access_key_id.clone().or_else(|| env("AZURE_STORAGE_ACCOUNT"));
            if let Some(ep) = options
                .endpoint
                .clone()
                .or_else(|| account.as_ref().map(|a| format!("https://{a}.blob.core.windows.net")))
            {
                b = b.endpoint(&ep);
            }
            if let Some(a) = &account {
                b = b.account_name(a);
            }
            if let Some(k) = options.secret_access_key.clone().or_else(|| env("AZURE_STORAGE_KEY")) {
                b = b.account_key(&k);
            }
            if options.anonymous {
                b = b.skip_signature();
            }
            Operator::new(b).map_err(op_err)?
        }
        StoreKind::Http => {
            // Endpoint is scheme://host[:port]; the path is the root.
            let scheme_end = url.find("://").map_or(0, |i| i + 3);
            let after = &url[scheme_end..];
            let (host, path) = after.split_once('/').unwrap_or((after, ""));
            let endpoint = format!("{}{host}", &url[..scheme_end]);
            let b = services::Http::default().endpoint(&endpoint).root(&format!("/{}", path.trim_matches('/')));
            Operator::new(b).map_err(op_err)?
        }
        StoreKind::Memory => Operator::new(services::Memory::default()).map_err(op_err)?,
        StoreKind::Local => return Err(Error::invalid(format!("{url:?} is a local path, not a remote store"))),
    };
    // Each store has an HTTP client of its own instead of opendal's process-wide one: its
    // pooled connections belong to this process's I/O runtime, so a child forked after the
    // parent read something opens stores whose connections work. Connections are kept alive
    // and reused (up to the store's request limit idle per host). Retries, timeouts and
    // hedging are [`Remote`]'s, so that each is counted.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(policy.max_requests)
        .pool_idle_timeout(Duration::from_secs(90))
        .connect_timeout(policy.request_timeout)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| Error::invalid(format!("cannot build the HTTP client for {url:?}: {e}")))?;
    let transport = opendal::HttpTransporter::new(opendal_http_transport_reqwest::ReqwestTransport::new(client));
    Ok(operator.with_context(opendal::OperationContext::new().with_http_transport(transport)))
}
