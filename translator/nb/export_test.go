package nb

// WithDHCP is withDHCP for the package's external tests.
var WithDHCP = withDHCP
