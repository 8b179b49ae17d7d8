//! The region requests are signed for. SigV4 names a region in each signature's scope; one
//! that is not the gateway's is answered as S3 answers it, 400 AuthorizationHeaderMalformed
//! naming the right region in `<Region>`, which clients (s3cmd with its default "US", the
//! SDKs' region redirection) use to sign again for it.

/// The region in a SigV4 request's credential scope (`Authorization` header or a presigned
/// URL's `X-Amz-Credential`), if it has one.
pub fn signed_for(headers: &http::HeaderMap, uri: &http::Uri) -> Option<String> {
    let from_header = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .filter(|a| a.starts_with("AWS4-HMAC-SHA256"))
        .and_then(|a| a.split("Credential=").nth(1))
        .map(|c| c.split([',', ' ']).next().unwrap_or_default().to_string());
    let credential = from_header.or_else(|| {
        uri.query()?.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == "X-Amz-Credential").then(|| percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned())
        })
    })?;
    // ACCESS_KEY/DATE/REGION/SERVICE/aws4_request
    let parts: Vec<&str> = credential.split('/').collect();
    (parts.len() == 5).then(|| parts[2].to_string())
}

/// S3's answer to a request signed for `asked` at a gateway of region `ours`.
pub fn wrong_region(asked: &str, ours: &str) -> http::Response<s3s::Body> {
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AuthorizationHeaderMalformed</Code>\
         <Message>The authorization header is malformed; the region '{}' is wrong; expecting '{}'</Message>\
         <Region>{}</Region></Error>",
        esc(asked),
        esc(ours),
        esc(ours)
    );
    let mut r = http::Response::new(s3s::Body::from(xml));
    *r.status_mut() = http::StatusCode::BAD_REQUEST;
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/xml"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_is_read_from_the_header_or_the_presigned_query() {
        let mut h = http::HeaderMap::new();
        let uri: http::Uri = "/b/k".parse().unwrap();
        assert_eq!(signed_for(&h, &uri), None);
        h.insert(
            http::header::AUTHORIZATION,
            "AWS4-HMAC-SHA256 Credential=AK/20261206/US/s3/aws4_request, SignedHeaders=host, Signature=00".parse().unwrap(),
        );
        assert_eq!(signed_for(&h, &uri).as_deref(), Some("US"));
        let q: http::Uri =
            "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F20261206%2Feu-west-1%2Fs3%2Faws4_request".parse().unwrap();
        assert_eq!(signed_for(&http::HeaderMap::new(), &q).as_deref(), Some("eu-west-1"));
        // SigV2 names no region.
        h.insert(http::header::AUTHORIZATION, "AWS AK:sig".parse().unwrap());
        assert_eq!(signed_for(&h, &uri), None);
        let r = wrong_region("US", "us-east-1");
        assert_eq!(r.status(), 400);
    }
}
