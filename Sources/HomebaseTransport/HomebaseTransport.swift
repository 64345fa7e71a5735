// HomebaseTransport module.
