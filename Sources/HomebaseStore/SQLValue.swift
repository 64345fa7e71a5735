/// One SQLite value, used both to bind parameters and to read columns.
///
/// SQLite integers are signed 64-bit; callers convert `UInt64` quantities (timestamps, delivery ids)
/// at the call site, where the valid range is known.
public enum SQLValue: Sendable, Equatable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null

    /// The SQLite storage class name, for error messages.
    public var typeName: String {
        switch self {
        case .integer: "INTEGER"
        case .real: "REAL"
        case .text: "TEXT"
        case .blob: "BLOB"
        case .null: "NULL"
        }
    }
}

extension SQLValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByFloatLiteral,
    ExpressibleByNilLiteral
{
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(stringLiteral value: String) { self = .text(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(nilLiteral: ()) { self = .null }
}

/// One result row: values by index or column name, with typed accessors that throw on a type mismatch
/// instead of coercing silently (a BLOB read as an integer is a bug we want to see).
public struct Row: Sendable, Equatable {
    /// Column names as SQLite reports them (the `AS` alias when there is one).
    public let columnNames: [String]
    public let values: [SQLValue]

    public init(columnNames: [String], values: [SQLValue]) {
        precondition(columnNames.count == values.count, "a row has one name per value")
        self.columnNames = columnNames
        self.values = values
    }

    public var count: Int { self.values.count }

    /// The value at `index`, or `.null` when out of range.
    public subscript(index: Int) -> SQLValue {
        self.values.indices.contains(index) ? self.values[index] : .null
    }

    /// The value of the first column called `name`, or `nil` if there is none.
    public subscript(name: String) -> SQLValue? {
        self.columnNames.firstIndex(of: name).map { self.values[$0] }
    }

    public func value(_ index: Int) throws -> SQLValue {
        guard self.values.indices.contains(index) else { throw StoreError.columnNotFound("#\(index)") }
        return self.values[index]
    }

    public func value(_ name: String) throws -> SQLValue {
        guard let i = self.columnNames.firstIndex(of: name) else { throw StoreError.columnNotFound(name) }
        return self.values[i]
    }

    public func isNull(_ index: Int) throws -> Bool { try self.value(index) == .null }
    public func isNull(_ name: String) throws -> Bool { try self.value(name) == .null }

    public func int64(_ index: Int) throws -> Int64 { try Self.int64(self.value(index), "#\(index)") }
    public func int64(_ name: String) throws -> Int64 { try Self.int64(self.value(name), name) }
    /// A REAL, or an INTEGER widened to Double.
    public func double(_ index: Int) throws -> Double { try Self.double(self.value(index), "#\(index)") }
    public func double(_ name: String) throws -> Double { try Self.double(self.value(name), name) }
    public func string(_ index: Int) throws -> String { try Self.string(self.value(index), "#\(index)") }
    public func string(_ name: String) throws -> String { try Self.string(self.value(name), name) }
    public func blob(_ index: Int) throws -> [UInt8] { try Self.blob(self.value(index), "#\(index)") }
    public func blob(_ name: String) throws -> [UInt8] { try Self.blob(self.value(name), name) }

    private static func int64(_ v: SQLValue, _ column: String) throws -> Int64 {
        guard case .integer(let x) = v else { throw Self.mismatch(column, "INTEGER", v) }
        return x
    }

    private static func double(_ v: SQLValue, _ column: String) throws -> Double {
        switch v {
        case .real(let x): return x
        case .integer(let x): return Double(x)
        default: throw Self.mismatch(column, "REAL", v)
        }
    }

    private static func string(_ v: SQLValue, _ column: String) throws -> String {
        guard case .text(let x) = v else { throw Self.mismatch(column, "TEXT", v) }
        return x
    }

    private static func blob(_ v: SQLValue, _ column: String) throws -> [UInt8] {
        guard case .blob(let x) = v else { throw Self.mismatch(column, "BLOB", v) }
        return x
    }

    private static func mismatch(_ column: String, _ expected: String, _ v: SQLValue) -> StoreError {
        .typeMismatch(column: column, expected: expected, actual: v.typeName)
    }
}
