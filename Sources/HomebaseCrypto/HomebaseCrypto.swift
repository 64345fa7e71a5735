// HomebaseCrypto module.
