import Testing
@testable import ManagedStore
