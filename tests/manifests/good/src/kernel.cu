// Parse-only fixture.
