//! The cloud backends, each compiled only with its cargo feature.

use super::*;

#[cfg(feature = "aws")]
pub(super) fn s3(url: &str, shown: &str, options: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};

    let builder = AmazonS3Builder::from_env().with_url(url);
    let mut builder = options.apply(shown, builder, |b, k, v| b.with_config(k, v))?;
    let plain_http = builder
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .is_some_and(|endpoint| endpoint.starts_with("http://"));
    if plain_http {
        builder = builder.with_allow_http(true);
    }
    if let Some(retry) = options.retry() {
        builder = builder.with_retry(retry);
    }
    // Set last so no environment variable or option can switch off the
    // If-None-Match create that write-once entries stand on.
    let store = builder
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .build()
        .map_err(|e| store_err(shown, e))?;
    Ok(Arc::new(store))
}

#[cfg(feature = "gcp")]
pub(super) fn gcs(url: &str, shown: &str, options: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
    use object_store::gcp::GoogleCloudStorageBuilder;

    let builder = GoogleCloudStorageBuilder::from_env().with_url(url);
    let mut builder = options.apply(shown, builder, |b, k, v| b.with_config(k, v))?;
    if let Some(retry) = options.retry() {
        builder = builder.with_retry(retry);
    }
    Ok(Arc::new(builder.build().map_err(|e| store_err(shown, e))?))
}

#[cfg(feature = "azure")]
pub(super) fn azure(url: &str, shown: &str, options: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
    use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};

    let builder = MicrosoftAzureBuilder::from_env().with_url(url);
    let mut builder = options.apply(shown, builder, |b, k, v| b.with_config(k, v))?;
    let plain_http = builder
        .get_config_value(&AzureConfigKey::Endpoint)
        .is_some_and(|endpoint| endpoint.starts_with("http://"));
    if plain_http {
        builder = builder.with_allow_http(true);
    }
    if let Some(retry) = options.retry() {
        builder = builder.with_retry(retry);
    }
    Ok(Arc::new(builder.build().map_err(|e| store_err(shown, e))?))
}

#[cfg(not(feature = "aws"))]
pub(super) fn s3(_: &str, shown: &str, _: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
    Err(disabled(shown, "aws"))
}

#[cfg(not(feature = "gcp"))]
pub(super) fn gcs(_: &str, shown: &str, _: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
    Err(disabled(shown, "gcp"))
}

#[cfg(not(feature = "azure"))]
pub(super) fn azure(_: &str, shown: &str, _: StoreOptions) -> Result<Arc<dyn ObjectStore>> {
    Err(disabled(shown, "azure"))
}

#[cfg_attr(
    all(feature = "aws", feature = "gcp", feature = "azure"),
    allow(dead_code)
)]
fn disabled(url: &str, feature: &'static str) -> Error {
    Error::StoreFeatureDisabled {
        url: url.to_owned(),
        feature,
    }
}
