# a random token in a file only you can read
umask 077
python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > weir-token
