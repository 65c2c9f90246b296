import Glibc

/// A fresh private directory under /tmp, removed by the returned closure.
public func makeTemporaryDirectory(_ tag: String) -> (path: String, remove: () -> Void) {
    var template = Array("/tmp/roomtest-\(tag)-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    return (path, {
        if let dir = opendir(path) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name != "." && name != ".." { unlink(path + "/" + name) }
            }
            closedir(dir)
        }
        rmdir(path)
    })
}
