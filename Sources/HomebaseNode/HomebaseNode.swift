// HomebaseNode module.
