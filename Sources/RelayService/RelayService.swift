// RelayService module.
