"""No models: pgque's tables live in schema ``pgque``, made by the migrations' installer.

The module exists because Django sends ``post_migrate`` only to apps with one.
"""
