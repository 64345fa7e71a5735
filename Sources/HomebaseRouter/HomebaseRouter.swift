// HomebaseRouter module.
