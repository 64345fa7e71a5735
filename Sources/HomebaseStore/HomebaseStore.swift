// HomebaseStore module.
