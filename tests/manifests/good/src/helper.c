/* Parse-only fixture. */
