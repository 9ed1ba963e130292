"""AWS adapters: the only package that imports boto3 / botocore."""
