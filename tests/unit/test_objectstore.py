"""Storage URLs and S3 error messages, without a server: what ``storage_location`` takes and
refuses, and what ``s3_error`` says for failures a real server cannot be made to produce here
(clock skew, an unknown error, permission errors by type). The exceptions are obstore's own
classes (or the built-ins it raises), constructed directly."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from obstore import exceptions as ox

from weir.base.errors import ConfigError, StorageError
from weir.state.objectstore import SCHEMES, S3Bucket, StorageLocation, s3_error, storage_location

WHERE = "s3://bucket/prefix/j/chk-3/_metadata"
ENDPOINT = "http://127.0.0.1:9000"
SECRET = "s3cr3t-never-printed"


def test_local_paths_file_urls_and_s3_urls_parse() -> None:
    assert storage_location("ckpt") == StorageLocation("file", path=Path("ckpt"))
    assert storage_location("a:b/c").path == Path("a:b/c")  # a colon inside a name is a name
    assert storage_location("file:///var/chk").path == Path("/var/chk")
    s3 = storage_location("s3://bucket/some/prefix/")
    assert (s3.scheme, s3.bucket, s3.prefix, s3.url) == ("s3", "bucket", "some/prefix",
                                                         "s3://bucket/some/prefix")  # fmt: skip
    assert s3.child("j").child("chk-2").url == "s3://bucket/some/prefix/j/chk-2"
    assert s3.child("j").parent == s3 and s3.child("j").name == "j"
    assert storage_location("s3://bucket").url == "s3://bucket"


@pytest.mark.parametrize(
    "value", ["gs://b/p", "hdfs://x/y", "s3:/typo", "s3:bucket/p", "S3:/x", "az:/c", "ftp://h/p"]
)
def test_an_unknown_or_mistyped_scheme_lists_the_supported_ones(value: str) -> None:
    with pytest.raises(ConfigError, match=rf"^`checkpoint_dir`='{value}'.*; use {SCHEMES}$"):
        storage_location(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", r"`restore` is empty; give a local path"),
        ("file://host/x", r"names host 'host'; a file URL is file:///PATH"),
        (f"s3://key:{SECRET}@bucket/p", r"'s3://\*\*\*@bucket/p' is not s3://BUCKET/PREFIX \("
         r"credentials go in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        ("s3:///p", r"is not s3://BUCKET/PREFIX"),
        ("s3://b/p?x=1", r"is not s3://BUCKET/PREFIX"),
    ],
)  # fmt: skip
def test_malformed_urls_name_the_fix_and_hide_credentials(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        storage_location(value, "`restore`")
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (ox.GenericError("status 403: <Code>RequestTimeTooSkewed</Code>"),
         "this machine's clock differs from the server's by too much: sync it (NTP)"),
        (ox.GenericError("<Code>NoSuchBucket</Code>"),
         f"the bucket does not exist at {ENDPOINT}: create it, or fix the bucket name"),
        (FileNotFoundError("Object at location p/j not found"), "it does not exist"),
        (ox.PermissionDeniedError("forbidden"), "access denied: check AWS_ACCESS_KEY_ID"),
        (ox.UnauthenticatedError("who are you"), "access denied: check AWS_ACCESS_KEY_ID"),
        (ox.GenericError("403 <Code>SignatureDoesNotMatch</Code>"), "access denied"),
        (ox.GenericError("403 <Code>InvalidAccessKeyId</Code>"), "access denied"),
        (ox.GenericError("error sending request for url (http://127.0.0.1:9000/b)"),
         f"cannot reach {ENDPOINT}: check AWS_ENDPOINT_URL (scheme, host and port)"),
        (ox.GenericError("teapot\nDebug source: lots of detail"),
         "teapot; check AWS_ENDPOINT_URL, the credentials and the bucket"),
        (ox.GenericError(""), "GenericError; check AWS_ENDPOINT_URL"),
    ],
    ids=["skew", "bucket", "missing", "denied", "unauthenticated", "signature", "key-id",
         "unreachable", "other", "empty"],
)  # fmt: skip
def test_s3_errors_are_one_line_naming_the_object_and_what_to_check(
    exc: BaseException, message: str
) -> None:
    err = s3_error(exc, WHERE, "read", ENDPOINT)
    assert isinstance(err, StorageError)
    assert str(err).startswith(f"cannot read {WHERE}: {message}"), str(err)
    assert "\n" not in str(err)


def test_without_an_endpoint_the_server_is_aws() -> None:
    err = s3_error(ox.GenericError("NoSuchBucket"), WHERE, "list", None)
    assert str(err) == f"cannot list {WHERE}: the bucket does not exist at AWS S3: create it, " + (
        "or fix the bucket name"
    )


def test_an_s3_bucket_crosses_processes_as_settings_and_refuses_a_bad_addressing_style() -> None:
    env = {"AWS_ENDPOINT_URL": ENDPOINT, "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_ACCESS_KEY_ID": "k", "WEIR_S3_ADDRESSING": "sideways"}  # fmt: skip
    bucket = S3Bucket(storage_location("s3://bucket/p"), env)
    copy = pickle.loads(pickle.dumps(bucket))
    assert copy.url == "s3://bucket/p" and copy.endpoint == ENDPOINT and copy._store is None
    refused = r"WEIR_S3_ADDRESSING='sideways' is not a choice; use one of path"
    with pytest.raises(ConfigError, match=refused):
        _ = copy.store
    assert SECRET not in repr(copy.where)
