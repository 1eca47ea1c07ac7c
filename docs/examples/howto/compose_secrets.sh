# the API's token and the object store's key: random, kept in files only you can read
umask 077
[ -f weir-token ] || python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > weir-token
[ -f s3-secret ] || python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > s3-secret
export WEIR_API_TOKEN="$(cat weir-token)" WEIR_S3_SECRET="$(cat s3-secret)"
