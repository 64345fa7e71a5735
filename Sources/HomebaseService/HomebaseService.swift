// HomebaseService module.
